"""Library facts that need no GPU: version, generated source, the disk cache."""
from __future__ import annotations

import json
from typing import Any, Mapping, Union

from . import _library, _runtime
from ._config import config_json


def version() -> str:
    """The version of the loaded libflashjit ("0.1.0")."""
    return _library.load().flashjit_version().decode()


def emit(config: Union[Mapping[str, Any], str]) -> str:
    """The generated CUDA source of a config (dict or JSON string)."""
    return _runtime.text(_library.load().flashjit_emit, config_json(config))


def cache_info() -> dict:
    """The disk cache of the process runtime: {"dir", "writable", "entries", "bytes", "max_bytes"}."""
    return json.loads(_runtime.text(_library.load().flashjit_cache_info, _runtime.handle()))
