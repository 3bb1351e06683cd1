"""Tests of autoglm_graph.glm.families against scikit-learn, glum and calculus."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.metrics import (
    log_loss,
    mean_gamma_deviance,
    mean_poisson_deviance,
    mean_squared_error,
    mean_tweedie_deviance,
)

from autoglm_graph.glm.families import (
    FAMILIES,
    BinomialFamily,
    Family,
    GammaFamily,
    GaussianFamily,
    MultinomialFamily,
    NegativeBinomialFamily,
    PoissonFamily,
    TweedieFamily,
    get_family,
)

K = 3  # classes for the multinomial family
N = 40

ALL_FAMILIES = [
    GaussianFamily(),
    BinomialFamily(),
    MultinomialFamily(),
    PoissonFamily(),
    GammaFamily(),
    *(TweedieFamily(power=p) for p in (0, 1, 1.2, 1.5, 2, 3)),
    NegativeBinomialFamily(theta=0.5),
    NegativeBinomialFamily(theta=2.0),
]
IDS = [repr(f) for f in ALL_FAMILIES]


def _is_log(family: Family) -> bool:
    return family.link_name == "log"


def _sample(family: Family, rng: np.random.Generator, n: int = N):
    """Random linear predictor and a valid y drawn around its mean (float64 numpy)."""
    if isinstance(family, MultinomialFamily):
        eta = rng.normal(size=(n, K))
        labels = np.arange(n) % K  # every class present
        return np.eye(K)[rng.permutation(labels)], eta
    eta = rng.normal(scale=0.7, size=n)
    mu = family.inverse_link(torch.from_numpy(eta)).numpy()
    if isinstance(family, BinomialFamily):
        y = (rng.random(n) < mu).astype(float)
        y[:2] = [0.0, 1.0]
    elif family.link_name == "identity":
        y = mu + rng.normal(size=n)
    elif family.in_y_range(np.zeros(1))[0]:  # counts / compound Poisson: zeros allowed
        y = rng.poisson(mu) * rng.gamma(4.0, 0.25, size=n)
        y[0] = 0.0
    else:
        y = rng.gamma(2.0, mu / 2.0)
    return y, eta


def _interior_y(family: Family, rng: np.random.Generator, n: int = N) -> np.ndarray:
    """Valid y strictly inside the range (so that eta = link(y) is finite)."""
    if isinstance(family, MultinomialFamily):
        return torch.softmax(torch.from_numpy(rng.normal(size=(n, K))), -1).numpy()
    if isinstance(family, BinomialFamily):
        return rng.uniform(0.05, 0.95, size=n)
    if _is_log(family):
        return rng.gamma(2.0, 1.0, size=n) + 1e-3
    return rng.normal(size=n)


def _reference(family: Family, y: np.ndarray, mu: np.ndarray, w: np.ndarray):
    """Weighted mean deviance from scikit-learn (or a direct formula)."""
    if isinstance(family, GaussianFamily):
        return mean_squared_error(y, mu, sample_weight=w)
    if isinstance(family, BinomialFamily):
        return 2 * log_loss(y, mu, sample_weight=w, labels=[0, 1])
    if isinstance(family, MultinomialFamily):
        return 2 * log_loss(y.argmax(1), mu, sample_weight=w, labels=list(range(K)))
    if isinstance(family, PoissonFamily):
        return mean_poisson_deviance(y, mu, sample_weight=w)
    if isinstance(family, GammaFamily):
        return mean_gamma_deviance(y, mu, sample_weight=w)
    if isinstance(family, TweedieFamily):
        return mean_tweedie_deviance(y, mu, sample_weight=w, power=family.power)
    assert isinstance(family, NegativeBinomialFamily)
    t = family.theta
    with np.errstate(divide="ignore", invalid="ignore"):
        ylogy = np.where(y > 0, y * np.log(y / mu), 0.0)
    d = 2 * (ylogy - (y + 1 / t) * np.log((1 + t * y) / (1 + t * mu)))
    return np.average(d, weights=w)


# ---------------------------------------------------------------- deviance values
@pytest.mark.parametrize("family", ALL_FAMILIES, ids=IDS)
def test_deviance_matches_reference(family):
    rng = np.random.default_rng(0)
    y, eta = _sample(family, rng)
    w = rng.uniform(0.1, 3.0, size=len(y))
    eta_t = torch.from_numpy(eta)
    mu = family.inverse_link(eta_t).numpy()
    got = family.deviance(torch.from_numpy(y), eta_t, torch.from_numpy(w))
    assert got.dim() == 0
    assert got.item() == pytest.approx(_reference(family, y, mu, w), rel=1e-6)
    unweighted = family.deviance(torch.from_numpy(y), eta_t)
    assert unweighted.item() == pytest.approx(
        _reference(family, y, mu, np.ones_like(w)), rel=1e-6
    )


@pytest.mark.parametrize("theta", [0.5, 2.0])
def test_negative_binomial_matches_glum(theta):
    glum_dist = pytest.importorskip("glum._distribution")
    family = NegativeBinomialFamily(theta=theta)
    rng = np.random.default_rng(1)
    y, eta = _sample(family, rng)
    w = rng.uniform(0.1, 3.0, size=len(y))
    mu = np.exp(eta)
    nb = glum_dist.NegativeBinomialDistribution(theta=theta)
    # glum's deviance is the weighted *sum* of unit deviances.
    expected = nb.deviance(y, mu, sample_weight=w) / w.sum()
    got = family.deviance(torch.from_numpy(y), torch.from_numpy(eta), torch.tensor(w))
    assert got.item() == pytest.approx(expected, rel=1e-6)
    units = family.unit_deviance(torch.from_numpy(y), torch.from_numpy(eta))
    np.testing.assert_allclose(units.numpy(), nb.unit_deviance(y, mu), rtol=1e-6)


def test_soft_labels_deviance():
    """Fractional binomial y and soft multinomial rows: the saturated deviance."""
    rng = np.random.default_rng(2)
    y = rng.uniform(size=N)
    eta = rng.normal(size=N)
    p = 1 / (1 + np.exp(-eta))
    expected = 2 * (y * np.log(y / p) + (1 - y) * np.log((1 - y) / (1 - p)))
    got = BinomialFamily().unit_deviance(torch.tensor(y), torch.tensor(eta))
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-10)

    y = _interior_y(MultinomialFamily(), rng)
    eta = rng.normal(size=(N, K))
    p = np.exp(eta) / np.exp(eta).sum(1, keepdims=True)
    expected = 2 * (y * np.log(y / p)).sum(1)
    got = MultinomialFamily().unit_deviance(torch.tensor(y), torch.tensor(eta))
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-10)


@pytest.mark.parametrize("family", ALL_FAMILIES, ids=IDS)
def test_deviance_is_zero_at_mean(family):
    y = torch.from_numpy(_interior_y(family, np.random.default_rng(3)))
    d = family.unit_deviance(y, family.link(y))
    assert d.shape == (N,)
    np.testing.assert_allclose(d.numpy(), 0.0, atol=1e-10)


@pytest.mark.parametrize("family", ALL_FAMILIES, ids=IDS)
def test_unit_deviance_is_nonnegative(family):
    y, eta = _sample(family, np.random.default_rng(4))
    d = family.unit_deviance(torch.from_numpy(y), torch.from_numpy(eta))
    assert d.shape == (N,)
    assert torch.all(d >= -1e-12)


@pytest.mark.parametrize("family", ALL_FAMILIES, ids=IDS)
def test_gradient_matches_finite_differences(family):
    rng = np.random.default_rng(5)
    y, eta = _sample(family, rng, n=12)
    w = torch.from_numpy(rng.uniform(0.1, 3.0, size=len(y)))
    eta_t = torch.from_numpy(eta).requires_grad_(True)
    y_t = torch.from_numpy(y)
    assert torch.autograd.gradcheck(lambda e: family.deviance(y_t, e, w), (eta_t,))


@pytest.mark.parametrize("family", ALL_FAMILIES, ids=IDS)
def test_column_eta_is_accepted(family):
    if isinstance(family, MultinomialFamily):
        pytest.skip("multinomial eta is [n, K]")
    y, eta = _sample(family, np.random.default_rng(6))
    y_t, eta_t = torch.from_numpy(y), torch.from_numpy(eta)
    flat = family.unit_deviance(y_t, eta_t)
    column = family.unit_deviance(y_t[:, None], eta_t[:, None])
    assert column.shape == (N,)
    torch.testing.assert_close(column, flat)


# ------------------------------------------------------------- links, variance
@pytest.mark.parametrize("family", ALL_FAMILIES, ids=IDS)
def test_inverse_link_of_link_is_identity(family):
    _, eta = _sample(family, np.random.default_rng(7))
    mu = family.inverse_link(torch.from_numpy(eta))
    eta_back = family.link(mu)
    torch.testing.assert_close(family.inverse_link(eta_back), mu)
    if isinstance(family, MultinomialFamily):
        torch.testing.assert_close(mu.sum(1), torch.ones(N, dtype=mu.dtype))
        torch.testing.assert_close(eta_back.sum(1), torch.zeros(N, dtype=mu.dtype))
    else:
        torch.testing.assert_close(eta_back, torch.from_numpy(eta))


@pytest.mark.parametrize(
    ("family", "formula"),
    [
        (GaussianFamily(), lambda mu: np.ones_like(mu)),
        (BinomialFamily(), lambda mu: mu * (1 - mu)),
        (MultinomialFamily(), lambda mu: mu * (1 - mu)),
        (PoissonFamily(), lambda mu: mu),
        (GammaFamily(), lambda mu: mu**2),
        (TweedieFamily(power=1.5), lambda mu: mu**1.5),
        (TweedieFamily(power=0), lambda mu: np.ones_like(mu)),
        (NegativeBinomialFamily(theta=2.0), lambda mu: mu + 2.0 * mu**2),
    ],
    # The family names the case; a lambda's repr holds its address, which
    # differs between pytest-xdist workers.
    ids=lambda v: repr(v) if isinstance(v, Family) else "",
)
def test_unit_variance(family, formula):
    mu = np.random.default_rng(8).uniform(0.05, 0.95, size=(N, K))
    if isinstance(family, MultinomialFamily):
        mu = mu / mu.sum(1, keepdims=True)
    got = family.unit_variance(torch.from_numpy(mu)).numpy()
    np.testing.assert_allclose(got, formula(mu), rtol=1e-12)


def test_link_names():
    expected = {
        "gaussian": "identity",
        "binomial": "logit",
        "multinomial": "softmax",
        "poisson": "log",
        "gamma": "log",
        "tweedie": "log",
        "negative_binomial": "log",
    }
    assert {name: cls().link_name for name, cls in FAMILIES.items()} == expected
    assert TweedieFamily(power=0).link_name == "identity"


# ------------------------------------------------------- numerical robustness
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("family", ALL_FAMILIES, ids=IDS)
def test_no_nan_for_extreme_eta(family, dtype):
    y, _ = _sample(family, np.random.default_rng(9), n=6)
    bound = 30.0 if _is_log(family) else 50.0
    for value in (-bound, bound):
        shape = (len(y), K) if isinstance(family, MultinomialFamily) else (len(y),)
        eta = torch.full(shape, value, dtype=dtype)
        if isinstance(family, MultinomialFamily):
            eta[:, 0] = -value
        eta.requires_grad_(True)
        d = family.deviance(torch.as_tensor(y, dtype=dtype), eta)
        d.backward()
        assert d.dtype == dtype
        assert torch.isfinite(d), (value, d)
        assert torch.all(torch.isfinite(eta.grad)), (value, eta.grad)
        assert not torch.any(torch.isnan(family.inverse_link(eta.detach())))


DEVICES = [
    "cpu",
    pytest.param(
        "cuda",
        marks=[
            pytest.mark.gpu,
            pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA"),
        ],
    ),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("family", ALL_FAMILIES, ids=IDS)
def test_float32_and_device(family, device):
    rng = np.random.default_rng(10)
    y, eta = _sample(family, rng)
    w = rng.uniform(0.1, 3.0, size=len(y))
    as32 = [torch.as_tensor(a, dtype=torch.float32, device=device) for a in (y, eta, w)]
    d32 = family.deviance(*as32)
    assert d32.dtype == torch.float32
    assert d32.device.type == device
    d64 = family.deviance(*(torch.from_numpy(a) for a in (y, eta, w)))
    assert d32.item() == pytest.approx(d64.item(), rel=1e-4)


# ------------------------------------------------------------------- y checks
@pytest.mark.parametrize("family", ALL_FAMILIES, ids=IDS)
def test_valid_y_passes(family):
    y, _ = _sample(family, np.random.default_rng(11))
    family.check_y(y)
    assert np.all(family.in_y_range(y))


@pytest.mark.parametrize(
    ("family", "y", "match"),
    [
        (
            BinomialFamily(),
            [0.0, 1.5],
            r"binomial family requires 0 <= y <= 1; .*"
            r"max\(y\)=1\.5",
        ),
        (BinomialFamily(), [-0.5, 1.0], r"binomial family .* min\(y\)=-0\.5"),
        (
            MultinomialFamily(),
            [0.0, 1.0],
            r"multinomial family requires y of shape "
            r"\(n_samples, n_classes\).*got y\.shape=\(2,\)",
        ),
        (
            MultinomialFamily(),
            [[1.5, -0.5]],
            r"multinomial .*values in \[0, 1\].*"
            r"min\(y\)=-0\.5",
        ),
        (
            MultinomialFamily(),
            [[0.5, 0.2], [0, 1]],
            r"rows summing to 1; got a row "
            r"summing to 0\.7",
        ),
        (
            PoissonFamily(),
            [-1.0, 2.0],
            r"The poisson family requires y >= 0; "
            r"got min\(y\)=-1\.0",
        ),
        (
            GammaFamily(),
            [0.0, 2.0],
            r"The gamma family requires y > 0; "
            r"got min\(y\)=0\.0",
        ),
        (
            TweedieFamily(power=1),
            [-1.0],
            r"tweedie family with power=1\.0 requires "
            r"y >= 0; got min\(y\)=-1\.0",
        ),
        (TweedieFamily(power=1.5), [-1.0, 2.0], r"power=1\.5 requires y >= 0"),
        (TweedieFamily(power=2), [0.0, 2.0], r"power=2\.0 requires y > 0"),
        (TweedieFamily(power=3), [0.0], r"power=3\.0 requires y > 0"),
        (
            NegativeBinomialFamily(),
            [-2.0],
            r"The negative_binomial family requires "
            r"y >= 0; got min\(y\)=-2\.0",
        ),
    ],
    ids=lambda v: repr(v) if isinstance(v, Family) else None,
)
def test_out_of_range_y_raises(family, y, match):
    with pytest.raises(ValueError, match=match):
        family.check_y(np.asarray(y))


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("family", ALL_FAMILIES, ids=IDS)
def test_non_finite_y_raises(family, bad):
    y, _ = _sample(family, np.random.default_rng(12))
    y = y.copy()
    y[3] = bad
    with pytest.raises(ValueError, match=rf"{family.name} .*contains NaN or infinity"):
        family.check_y(y)


@pytest.mark.parametrize("family", ALL_FAMILIES, ids=IDS)
def test_empty_y_raises(family):
    with pytest.raises(ValueError, match="non-empty y"):
        family.check_y(np.empty((0, K) if family.n_outputs(K) > 1 else 0))


def test_gaussian_and_tweedie_zero_accept_any_real():
    y = np.array([-1e6, -1.0, 0.0, 3.0])
    GaussianFamily().check_y(y)
    TweedieFamily(power=0).check_y(y)


# -------------------------------------------------------------- initial_eta
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("family", ALL_FAMILIES, ids=IDS)
def test_initial_eta_is_link_of_weighted_mean(family, weighted):
    rng = np.random.default_rng(13)
    y, _ = _sample(family, rng)
    w = rng.uniform(0.1, 3.0, size=len(y)) if weighted else None
    got = family.initial_eta(y, w)
    assert got.dtype == np.float64
    assert got.shape == (family.n_outputs(K),)
    mean = np.average(y, axis=0, weights=w)
    if isinstance(family, MultinomialFamily):
        expected = np.log(mean) - np.log(mean).mean()
    else:
        link = {"identity": lambda m: m, "log": np.log}
        link["logit"] = lambda m: np.log(m / (1 - m))
        expected = np.atleast_1d(link[family.link_name](mean))
    np.testing.assert_allclose(got, expected, rtol=1e-12)


@pytest.mark.parametrize(
    ("family", "y"),
    [
        (BinomialFamily(), np.zeros(5)),
        (BinomialFamily(), np.ones(5)),
        (PoissonFamily(), np.zeros(5)),
        (TweedieFamily(power=1.5), np.zeros(5)),
        (MultinomialFamily(), np.eye(3)[[0, 0, 2]]),  # class 1 is empty
    ],
    ids=repr,
)
def test_initial_eta_is_finite_at_boundary(family, y):
    eta = family.initial_eta(y)
    assert np.all(np.isfinite(eta))
    if isinstance(family, MultinomialFamily):
        assert eta.sum() == pytest.approx(0.0, abs=1e-9)
        assert eta.argmin() == 1


def test_n_outputs():
    assert PoissonFamily().n_outputs() == 1
    assert BinomialFamily().n_outputs(2) == 1
    assert MultinomialFamily().n_outputs(4) == 4
    with pytest.raises(ValueError, match="requires n_classes >= 2; got n_classes=None"):
        MultinomialFamily().n_outputs()


# --------------------------------------------------------------- get_family
def test_get_family_passes_instances_through():
    family = TweedieFamily(power=1.3)
    assert get_family(family) is family
    assert get_family(family, power=2.0) is family


@pytest.mark.parametrize(
    ("name", "cls"),
    [
        *FAMILIES.items(),
        ("Poisson", PoissonFamily),
        ("  GAMMA ", GammaFamily),
        ("normal", GaussianFamily),
        ("nb", NegativeBinomialFamily),
        ("NegativeBinomial", NegativeBinomialFamily),
        ("negative-binomial", NegativeBinomialFamily),
    ],
)
def test_get_family_by_name(name, cls):
    family = get_family(name)
    assert type(family) is cls


def test_get_family_passes_and_ignores_params():
    family = get_family("tweedie", power=1.2, theta=5.0)
    assert isinstance(family, TweedieFamily)
    assert family.power == 1.2
    family = get_family("negative_binomial", power=1.2, theta=5.0)
    assert family.theta == 5.0
    assert isinstance(get_family("poisson", power=1.2, theta=5.0), PoissonFamily)
    assert get_family("tweedie", power=None).power == 1.5


def test_get_family_unknown_name_raises():
    with pytest.raises(
        ValueError,
        match=r"Unknown family 'foo'; expected one of: binomial, gamma, gaussian, "
        r"multinomial, negative_binomial, poisson, tweedie\.",
    ):
        get_family("foo")
    with pytest.raises(TypeError, match="must be a string or a Family instance"):
        get_family(3)


@pytest.mark.parametrize("power", [-1.0, 0.5, 0.999, np.inf, np.nan])
def test_bad_tweedie_power_raises(power):
    with pytest.raises(ValueError, match=r"The tweedie power must be 0 or >= 1; got"):
        TweedieFamily(power=power)
    with pytest.raises(ValueError, match=r"tweedie power must be 0 or >= 1"):
        get_family("tweedie", power=power)


@pytest.mark.parametrize("theta", [0.0, -1.0, np.inf, np.nan])
def test_bad_theta_raises(theta):
    with pytest.raises(ValueError, match=r"negative_binomial theta must be .*> 0"):
        NegativeBinomialFamily(theta=theta)
    with pytest.raises(ValueError, match=r"theta must be .*> 0"):
        get_family("nb", theta=theta)


def test_repr():
    assert repr(TweedieFamily(power=1.5)) == "TweedieFamily(power=1.5)"
    assert repr(NegativeBinomialFamily(theta=2)) == "NegativeBinomialFamily(theta=2.0)"
    assert repr(GaussianFamily()) == "GaussianFamily()"
    assert repr(get_family("binomial")) == "BinomialFamily()"


def test_negative_binomial_theta_maximises_the_likelihood():
    from scipy.optimize import minimize_scalar

    rng = np.random.default_rng(0)
    mu = np.exp(rng.normal(size=4000))
    w = rng.uniform(0.5, 2.0, size=mu.size)
    y = rng.negative_binomial(1 / 0.7, 1 / (1 + 0.7 * mu))
    theta = NegativeBinomialFamily.estimate_theta(y, mu, w)

    def loss(t):
        return -NegativeBinomialFamily.log_likelihood(y, mu, np.exp(t), w)

    best = minimize_scalar(loss, bracket=(-2.0, 0.0), options={"xtol": 1e-12})
    np.testing.assert_allclose(theta, np.exp(best.x), rtol=1e-6)
    assert loss(np.log(theta)) <= best.fun + 1e-9
    # Weight 2 is a repeated row.
    repeated = NegativeBinomialFamily.estimate_theta(
        np.r_[y, y[:100]], np.r_[mu, mu[:100]], np.r_[w, w[:100]]
    )
    w2 = w.copy()
    w2[:100] *= 2
    np.testing.assert_allclose(
        NegativeBinomialFamily.estimate_theta(y, mu, w2), repeated, rtol=1e-10
    )


def test_negative_binomial_theta_is_the_first_root_of_the_score():
    # The score is within rounding of zero at the Poisson end of the range:
    # Brent's method on the whole range converged there (theta 1e-8) with
    # scipy 1.17 on these rows, whose theta is 0.25.
    rng = np.random.default_rng(0)
    x = rng.standard_normal((400, 2))[:, 0]
    mu = np.exp(0.5 + 0.4 * x)
    y = rng.negative_binomial(4, 1 / (1 + 0.25 * mu))
    theta = NegativeBinomialFamily.estimate_theta(y, mu)
    assert 0.1 < theta < 0.5
    ll = NegativeBinomialFamily.log_likelihood
    assert ll(y, mu, theta) > max(ll(y, mu, theta * 1.01), ll(y, mu, theta / 1.01))


def test_negative_binomial_theta_without_overdispersion():
    rng = np.random.default_rng(1)
    mu = np.full(3000, 4.0)
    y = rng.binomial(8, 0.5, size=mu.size)  # underdispersed: variance 2 < mu
    assert NegativeBinomialFamily.estimate_theta(y, mu) < 1e-7  # the Poisson limit


def test_negative_binomial_log_likelihood_matches_scipy():
    from scipy import stats

    y, mu, theta = np.array([0.0, 1.0, 5.0, 12.0]), np.array([0.5, 2.0, 4.0, 9.0]), 0.4
    r = 1 / theta
    expected = stats.nbinom.logpmf(y, r, r / (r + mu)).sum()
    np.testing.assert_allclose(
        NegativeBinomialFamily.log_likelihood(y, mu, theta), expected, rtol=1e-12
    )
