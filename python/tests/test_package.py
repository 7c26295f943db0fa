"""The package as the wheel ships it: __version__, py.typed, the console script, and where NVRTC comes from
when no toolkit is installed (configure_nvrtc). No GPU, no library needed."""
import re
from pathlib import Path

import flashjit
from flashjit import _cli, _library

ROOT = Path(__file__).resolve().parents[2]


def test_version_is_the_cmake_project_version():
    cmake = (ROOT / "CMakeLists.txt").read_text()
    assert re.search(r"project\(flashjit VERSION ([0-9.]+)", cmake).group(1) == flashjit.__version__


def test_typed_and_console_script_declared():
    assert (ROOT / "python" / "flashjit" / "py.typed").is_file()
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert 'flashjit = "flashjit._cli:main"' in pyproject
    assert "nvidia-cuda-nvrtc" in pyproject


def test_abi_version_macro_matches_soversion_source():
    header = (ROOT / "include" / "flashjit" / "flashjit.h").read_text()
    assert re.search(r"^#define FLASHJIT_ABI_VERSION [0-9]+$", header, re.M)


def _wheel_site(tmp_path):
    lib = tmp_path / "site" / "nvidia" / "cu13" / "lib"
    lib.mkdir(parents=True)
    (lib / "libnvrtc.so.13").write_bytes(b"")
    return tmp_path / "site", lib / "libnvrtc.so.13"


def test_configure_nvrtc_takes_the_wheel_only_without_a_toolkit(tmp_path, monkeypatch):
    site, wheel_lib = _wheel_site(tmp_path)
    monkeypatch.setattr(_library.sys, "path", [str(site)])
    assert _library.wheel_nvrtc() == wheel_lib

    # No toolkit anywhere: the wheel's library, through FLASHJIT_NVRTC.
    monkeypatch.setattr(_library, "_toolkit_nvrtc", lambda environ: None)
    env = {}
    assert _library.configure_nvrtc(env) == str(wheel_lib)
    assert env == {"FLASHJIT_NVRTC": str(wheel_lib)}
    # An explicit FLASHJIT_NVRTC is left alone.
    env = {"FLASHJIT_NVRTC": "/opt/nvrtc/libnvrtc.so"}
    assert _library.configure_nvrtc(env) is None
    assert env == {"FLASHJIT_NVRTC": "/opt/nvrtc/libnvrtc.so"}


def test_toolkit_nvrtc_prefers_cuda_home(tmp_path):
    toolkit = tmp_path / "cuda" / "lib64"
    toolkit.mkdir(parents=True)
    (toolkit / "libnvrtc.so.13").write_bytes(b"")
    assert _library._toolkit_nvrtc({"CUDA_HOME": str(tmp_path / "cuda")}) == toolkit / "libnvrtc.so.13"
    env = {"CUDA_HOME": str(tmp_path / "cuda")}
    assert _library.configure_nvrtc(env) is None  # the library finds the toolkit's itself
    assert "FLASHJIT_NVRTC" not in env


def test_console_script_finds_a_cli_binary():
    # In the repository: the build's (tools/setup.sh); in the wheel: flashjit/bin/flashjit.
    try:
        exe = _cli.executable()
    except FileNotFoundError:
        return
    assert exe.name == "flashjit"
