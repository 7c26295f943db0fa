"""Explicit kernel configs as the C ABI takes them (JSON text)."""
import json
from collections.abc import Mapping


def config_json(config):
    """UTF-8 JSON of a config given as a dict (or any mapping) or as JSON text. Fields a config for a problem
    leaves out (dtype, head_dim, mask, arch) are taken from the problem and its device."""
    if isinstance(config, str):
        return config.encode()
    if isinstance(config, Mapping):
        try:
            return json.dumps(dict(config)).encode()
        except (TypeError, ValueError) as e:
            raise ValueError(f"config: not representable as JSON ({e})") from None
    raise ValueError(f"config must be a dict or a JSON string, got {type(config).__name__}")
