"""`ember.distributed.checkpoint`: save/load of (sharded) state dicts, each rank writing its own
pieces, resharding on load to another world size or placement; files are safetensors plus one
JSON metadata file (nothing is unpickled). `state_dict` holds get/set_state_dict helpers."""
from ._api import FileSystemReader, FileSystemWriter, load, save

__all__ = ["save", "load", "FileSystemWriter", "FileSystemReader"]
