"""ember.optim: optimizers and learning-rate schedulers with PyTorch's update rules.

>>> import ember
>>> w = ember.zeros(2, requires_grad=True)
>>> opt = ember.optim.Adam([w], lr=0.1)
>>> (w - 1).square().sum().backward(); opt.step()
>>> [round(v, 4) for v in w.tolist()]
[0.1, 0.1]
"""
from . import lr_scheduler
from .adam import Adam, Adamax, AdamW, NAdam, RAdam
from .optimizer import Optimizer
from .rmsprop import Adagrad, RMSprop
from .sgd import SGD

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "Adamax", "NAdam", "RAdam", "RMSprop", "Adagrad",
           "lr_scheduler"]
