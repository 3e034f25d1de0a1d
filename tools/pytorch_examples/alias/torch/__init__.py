"""Run a PyTorch script unchanged on ember: with this folder first on PYTHONPATH, `import torch`
gives ember and `import torch.X` gives ember.X (the modules themselves, not copies). For trying
PyTorch's own example scripts (tools/pytorch_examples/run.sh); ember never imports torch."""
import importlib
import importlib.abc
import importlib.util
import sys

import ember


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path=None, target=None):
        if name.startswith("torch."):
            return importlib.util.spec_from_loader(name, self)
        return None

    def create_module(self, spec):
        return importlib.import_module("ember" + spec.name[len("torch"):])

    def exec_module(self, module):
        pass


sys.meta_path.insert(0, _Alias())
sys.modules["torch"] = ember
