"""`ember.distributions`: probability distributions, transforms and KL divergences with
torch.distributions' API and formulas.

>>> import ember
>>> from ember.distributions import Normal
>>> d = Normal(ember.tensor([0.0]), ember.tensor([2.0]))
>>> [round(v, 4) for v in d.entropy().tolist()]
[2.1121]

rsample gives reparameterized samples (gradients flow to loc/scale/...) for Normal, Uniform,
Laplace, Exponential, MultivariateNormal and what is built from them (Independent,
TransformedDistribution, LogNormal); Gamma, Beta and Dirichlet sample through numpy's gamma
sampler, so their rsample has no gradient with respect to the concentration (it says so).
"""
from . import constraints, transforms
from .continuous import Beta, Dirichlet, Exponential, Gamma, Laplace, Normal, Uniform
from .discrete import Bernoulli, Binomial, Categorical, OneHotCategorical, Poisson
from .distribution import Distribution
from .kl import kl_divergence, register_kl
from .multivariate import Independent, MultivariateNormal
from .transformed import LogNormal, TransformedDistribution
from .transforms import (
    AbsTransform,
    AffineTransform,
    ComposeTransform,
    ExpTransform,
    PowerTransform,
    SigmoidTransform,
    SoftplusTransform,
    StickBreakingTransform,
    TanhTransform,
    Transform,
    biject_to,
    transform_to,
)

__all__ = ["Distribution", "Normal", "Uniform", "Laplace", "Exponential", "Gamma", "Beta",
           "Dirichlet", "Bernoulli", "Categorical", "OneHotCategorical", "Poisson", "Binomial",
           "MultivariateNormal", "Independent", "TransformedDistribution", "LogNormal",
           "kl_divergence", "register_kl", "constraints", "transforms", "Transform",
           "ExpTransform", "AffineTransform", "SigmoidTransform", "TanhTransform",
           "PowerTransform", "SoftplusTransform", "AbsTransform", "ComposeTransform",
           "StickBreakingTransform", "biject_to", "transform_to"]
