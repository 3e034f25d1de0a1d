"""ember.optim: optimizers and learning-rate schedulers with PyTorch's update rules.

>>> import ember
>>> w = ember.zeros(2, requires_grad=True)
>>> opt = ember.optim.Adam([w], lr=0.1)
>>> (w - 1).square().sum().backward(); opt.step()
>>> [round(v, 4) for v in w.tolist()]
[0.1, 0.1]
"""
from . import lr_scheduler
from .adadelta import ASGD, Adadelta, Rprop
from .adam import Adam, Adamax, AdamW, NAdam, RAdam
from .lbfgs import LBFGS
from .optimizer import Optimizer
from .rmsprop import Adagrad, RMSprop
from .sgd import SGD
from .sparse_adam import SparseAdam

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "Adamax", "NAdam", "RAdam", "RMSprop", "Adagrad",
           "Adadelta", "ASGD", "Rprop", "LBFGS", "SparseAdam", "lr_scheduler", "swa_utils"]


def __getattr__(name):
    # swa_utils needs ember.nn (AveragedModel is a Module): loaded on first use
    if name == "swa_utils":
        import importlib
        return importlib.import_module(f"{__name__}.swa_utils")
    raise AttributeError(f"module '{__name__}' has no attribute '{name}'")
