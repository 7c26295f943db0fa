"""Build hook: ships libflashjit.so inside the package when the CMake build has one.

The library is taken from $FLASHJIT_BUILD_DIR, else ../build (the repository's build folder). Without it the
package still installs and finds the library at run time through FLASHJIT_LIBRARY.
"""
import os
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

HERE = Path(__file__).resolve().parent
LIBRARY = "libflashjit.so"


def built_library():
    build = Path(os.environ.get("FLASHJIT_BUILD_DIR", HERE.parent / "build"))
    path = build / LIBRARY
    return path if path.is_file() else None


class BuildPyWithLibrary(build_py):
    def run(self):
        super().run()
        library = built_library()
        if library is None:
            print(f"flashjit: no {LIBRARY} in the build folder; set FLASHJIT_LIBRARY at run time")
            return
        target = Path(self.build_lib) / "flashjit" / LIBRARY
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(library, target)
        print(f"flashjit: shipping {library}")


class LibraryDistribution(Distribution):
    def has_ext_modules(self):
        # A shipped shared library makes the wheel platform-specific.
        return built_library() is not None


setup(cmdclass={"build_py": BuildPyWithLibrary}, distclass=LibraryDistribution)
