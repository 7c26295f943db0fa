# The package version; CMakeLists.txt's project(VERSION) is the source (python/tests/test_package.py checks).
__version__ = "0.1.0"
