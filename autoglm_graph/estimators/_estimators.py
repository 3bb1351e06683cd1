"""scikit-learn estimators: GraphGLMRegressor and GraphGLMClassifier."""

from __future__ import annotations

import numpy as np
import pandas as pd
from sklearn.base import ClassifierMixin, RegressorMixin
from sklearn.preprocessing import LabelEncoder
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_array

from ..explain import IntervalSettings, fit_intervals
from ..glm import Family, NegativeBinomialFamily, get_family
from ..persistence import register_estimator
from ..policy import FitPolicy
from ..utils import check_option
from ._base import BaseGraphGLM

__all__ = [
    "GraphGLMClassifier",
    "GraphGLMRegressor",
]

_COMMON_PARAMS_DOC = """
    alpha : float, default=1e-4
        L2 penalty of the global GLM's slopes, as in scikit-learn's
        ``PoissonRegressor``: the global GLM minimises
        ``(1/sum(w)) sum_i w_i unit_deviance_i / 2 + alpha/2 ||beta||^2``,
        with ``beta`` the slopes in the user's units (``coef_``: per unit of
        each numeric column, per one-hot level) and the intercept not
        penalised. ``LogisticRegression(C=1 / (n * alpha))`` and
        ``Ridge(alpha=n * alpha)`` have the same objective (unit weights).
    formula : str or None, default=None
        The global GLM's terms as a formula, parsed by formulaic (as glum's
        ``formula``), e.g. ``"y ~ age + C(region) + bs(age, df=4) +
        age:density"``, with ``X`` a DataFrame. A left side names the
        target, a column of ``X`` (``fit(X)`` with ``y=None``; a ``y`` too is
        an error); without one ``y`` is passed as usual. The formula's columns
        (levels coded against the first level, splines, interactions,
        transforms) are the terms whose coefficients vary per row, named as
        formulaic names them in ``feature_names_out_``; the intercept is
        ``fit_intercept``'s (a formula's ``- 1`` or ``+ 0`` must agree with
        it). The network's context stays the preprocessed columns of ``X``
        without the target. New rows get the columns of ``fit`` (its levels,
        knots and centring); a level ``fit`` did not see warns
        (``UnseenCategoryWarning``) and codes as the base level; missing
        values in the formula's columns are an error. ``categorical_coding=
        "all_levels"`` keeps every level (formulaic's ``ensure_full_rank=
        False``); ``base_levels`` does not apply (write the base in the
        formula: ``C(region, contr.treatment("b"))``). None: every column of
        ``X``, as preprocessed.
    splines : bool or list of str, default=False
        Automatic non-linear main effects in the global GLM (a GAM). True:
        every numeric column among the GLM's terms with at least 6 distinct
        values keeps its linear term and gains a cubic B-spline basis on
        uniform knots (up to 12) over its training range, penalised by the
        squared second differences of its coefficients (P-splines; ``lam ->
        inf`` is the linear term); a list names the columns. One smoothing
        penalty, chosen by generalised cross-validation on the global GLM, is
        ``splines_penalty_``. The basis columns (``<column>_s1``, ...) are
        terms of the global GLM (``coef_``, ``coef_table``: standard errors
        of the penalised fit, Bayesian; ``wald_test_terms``: a column's basis
        jointly; which of them the network varies: ``splines_local``); new
        rows beyond the training range continue each shape linearly.
        ``plotting.plot_term`` draws a column's shape. Not with ``formula``
        (write ``bs(...)`` there). See ``docs/decisions/splines.md``.
    splines_local : {"linear", "all"}, default="linear"
        Which spline terms the network varies per row. ``"linear"``: each
        spline column's linear term (and the intercept and the other terms)
        varies, its basis is held global, as ``global_terms`` holds a term
        (``local_coef`` has no spread on ``<column>_s1``, ...): every row
        shares the GAM's shape, tilted per row. ``"all"``: the basis varies
        per row too. No effect without ``splines``. See
        ``docs/decisions/splines.md`` for the measurement behind the default.
    fit_intercept : bool, default=True
        Whether the model has an intercept (scikit-learn's parameter). Without
        one the global GLM is scikit-learn's ``fit_intercept=False`` GLM on the
        raw columns (the numeric columns are scaled, not centred), the network
        varies the slopes only, ``local_coef`` and ``coef_table`` have no
        intercept and ``balance`` is off (``balance=True`` is an error). X
        without a column that varies fits the intercept-only GLM (R's
        ``y ~ 1``), without a network.
    categorical_coding : {"treatment", "all_levels"}, default="treatment"
        How the global GLM codes a categorical column. ``"treatment"``: one
        term per level except the column's base level (``base_levels``), whose
        effect is the intercept's, as R, statsmodels and tariffs code a factor;
        at ``alpha=0`` the coefficients and ``coef_table`` equal statsmodels'
        treatment-coded GLM. Without an intercept the first categorical
        column keeps every level (R's ``y ~ 0 + f``). ``"all_levels"``: a term
        for every level (glum's ``drop_first=False``), identified by the
        penalty only, so their standard errors are large. The network's
        context keeps every level either way, and the network varies every
        level's coefficient; under treatment coding ``local_coef`` reports
        them against the base (its deviation moved into the intercept's),
        except without an intercept, with a formula or splines, and for
        columns named in ``global_terms`` or ``local_sign``, where it varies
        the GLM's terms only.
    base_levels : dict or None, default=None
        Categorical column -> its base level under treatment coding. A column
        not named gets the level with the largest total sample weight (ties:
        the first in sorted order); the choices are in ``base_levels_``.
    min_frequency : int, float or None, default=None
        None keeps every level of every categorical column, as statsmodels,
        glum and R do: a ``DataFrame`` gives the same GLM as the formula
        ``C(column)``. Set it to group rare levels: levels seen in fewer rows
        than this (an int; a float in ``(0, 1)`` is a share of the rows) share
        one ``<column>_infrequent_sklearn`` term; ``factor_table`` lists its
        members, ``preprocessor_.infrequent_levels()`` too. Levels unseen in
        ``fit`` then join that group.
    max_categories : int or None, default=None
        None keeps every level; an int caps the terms per categorical column
        (the rarest levels grouped as with ``min_frequency``).
    handle_missing : {"impute", "error"}, default="impute"
        Missing values in ``X``. ``"impute"``: a numeric column's get its
        median in ``fit`` plus a 0/1 ``missingindicator_<column>`` term, a
        categorical column's the level ``"missing"``; a column with no missing
        value in ``fit`` that has some at predict warns
        (``NewMissingValuesWarning``). ``"error"``: missing values raise a
        ``ValueError`` naming the columns, in ``fit`` and at predict. See
        :class:`~autoglm_graph.TabularPreprocessor` for what else the
        preprocessing does (text in numeric columns, identifiers).
    n_neighbors : int, default=16
        Neighbours (training rows) per row in the similarity graph.
    threshold : float, default=0.0
        Cosine similarity below which a neighbour is dropped (tau).
    graph_space : {"embedding", "input"}, default="embedding"
        Build the graph in the learned embedding space (rebuilt every
        ``graph_refresh`` epochs) or in the standardised input space.
    graph_refresh : int, default=10
        Epochs between rebuilds of the embedding-space graph. The validation
        rows' neighbours are searched at the same rebuilds (not every epoch),
        so that early stopping scores them as new rows at that point.
    graph_backend : {"auto", "exact", "faiss"}, default="auto"
        Neighbour search (:func:`autoglm_graph.cosine_topk`): exact search
        (faiss's exhaustive search on a CPU, tiles on a GPU), or faiss HNSW
        (approximate, its efSearch calibrated to recall@k 0.95 on a sample of
        the queries; see
        ``benchmarks/results/graph_build_approx.md``; needs ``faiss-cpu``).
        ``"auto"``: exact below 150k rows on a CPU (up to 10M on a GPU),
        faiss above. The embedding graph's refreshes (the training rows among
        themselves, rebuilt every ``graph_refresh`` epochs) use a faiss IVF
        index from 5,000 rows on a CPU under ``"auto"``, recall calibrated to
        0.95 (else exact): 3-5x cheaper than the exact search on the suite's
        embeddings; ``"exact"`` keeps them exact. The index over the training rows is
        built once and serves validation and prediction; for many predictions
        from 50k+ training rows, ``"faiss"`` is worth trying below 150k too
        (2.5-4x faster prediction on real rows at 100k, see
        ``benchmarks/results/predict.md``).
    hidden_channels : int, default=64
        Width of the encoder and attention layers.
    heads : int, default=4
        Attention heads; must divide ``hidden_channels``.
    num_layers : int, default=2
        Graph attention layers.
    conv : {"gat", "gatv2"}, default="gat"
        torch_geometric's ``GATConv`` or ``GATv2Conv``.
    message_passing : {"auto", "fused", "pyg"}, default="auto"
        How attention runs. ``"fused"``: the fixed-degree fast path
        (:mod:`autoglm_graph.fused`; ``conv="gat"`` only), equal to the
        torch_geometric layer to float rounding and several times faster on a
        CPU; ``"pyg"``: torch_geometric's layer (the reference). ``"auto"``:
        the fast path where it exists.
    dropout : float, default=0.1
        Dropout on hidden states and attention weights. With ``dropout=0`` the
        training forward pass doubles as the validation pass (faster), but the
        benchmark suite's test deviance is better with 0.1 (mean rank 2.12 vs
        2.26 over 17 datasets; ``benchmarks/results/suite_dropout0.md``).
    use_neighbor_targets : bool, default=True
        Let last-layer messages carry neighbours' outcomes (target on the link
        scale and residual under the global GLM). A training row never sees its
        own outcome, and validation rows are never neighbours.
    location_columns : list of str or int, or None, default=None
        Numeric columns of ``X`` holding coordinates (e.g. ``["long", "lat"]``)
        over which the outcome may vary smoothly. Each row then gets a
        *location effect*, a shift of its intercept: the global GLM's residual
        averaged over its ``location_neighbors`` nearest training rows by
        Euclidean distance in these columns (its own outcome left out), times
        a credibility coefficient fitted on the training rows
        (:mod:`autoglm_graph.location`). It is kept only when it lowers the
        deviance (training rows left out one at a time, and the validation
        rows) by more than one standard error; the network trains on top.
        The graph's 16 neighbours cannot find such an effect when it needs
        the exposure of hundreds of rows to show (claim frequency over
        Belgium: ``benchmarks/results/insurance.md``). With ``max_epochs=0``
        the model is the GLM and its location effect, without a network (a
        fit of seconds). Single-output families; not with ``groups``.
    location_neighbors : int or "auto", default="auto"
        Training rows per neighbourhood of the location effect; ``"auto"``
        picks the best of 50 to 3,000 (at most a fifth of the training rows)
        on the training rows' leave-one-out deviance.
    local_penalty : float, default=1e-3
        Penalty on the squared per-row coefficient deviations. ``numpy.inf``
        gives exactly the global GLM (no network is trained).
    global_terms : list of str or None, default=None
        Terms whose coefficient is the same for every row (a regulated or
        protected factor): names in ``feature_names_out_``, categorical input
        columns (all their levels) or ``"intercept"`` (constant in the user's
        units). The network outputs no deviation for them, so ``local_coef``
        has no spread there on any rows (:mod:`autoglm_graph.constraints`).
    local_sign : dict of str to {"positive", "negative"} or None, default=None
        Slopes (names as in ``global_terms``) whose per-row coefficient keeps
        a sign on any row: it is the global coefficient times
        ``exp(deviation)``. ``fit`` raises a ValueError when the global GLM's
        own coefficient has the other sign or is 0. Neither constraint is in
        the default search space, nor set by the command line.
    interval_members : int, default=0
        Bootstrap members fitted after the model, for
        ``local_coef(X, interval=0.9)``: each a copy of the model refitted
        (global GLM and network) with every row's weight multiplied by an
        ``Exp(1)`` draw (one per group with ``groups``), the Bayesian
        bootstrap; they are ``interval_members_``. 0 fits none; otherwise at
        least 2 (20 gives stable 90 % bounds). Fitting costs about
        ``1 + interval_members`` fits, ``local_coef`` with ``interval`` as
        many. The members' spread measures the refits' variability, not the
        bias of the smoothing; ``interval_settings`` adds an estimate of it
        (:mod:`autoglm_graph.intervals`). A fitted model that is the global
        GLM (``is_global_only_``) fits no members: its intervals are the
        GLM's own Wald intervals, ``coef_table``'s bounds on every row, from
        its covariance kept at fit (``interval_cov_``).
    interval_settings : IntervalSettings or None, default=None
        How the members become bounds (None: the defaults,
        ``IntervalSettings(bias="pilot")``): each term's interval is widened
        by its root mean squared bias, estimated at the end of ``fit``
        against local GLMs of the rows' nearest neighbours. On data with
        known coefficients the nominal 90 % intervals covered 0.82-0.90 of
        them, against 0.48-0.54 for the members' spread alone
        (``IntervalSettings(bias="none")``; ``docs/decisions/intervals.md``).
        Only with ``interval_members >= 2``.
    learning_rate : float, default=6e-3
        AdamW learning rate. 6e-3 rather than 3e-3: on the 13 benchmark-suite
        datasets where the network is kept (two seeds; ``diamonds`` one), 23 %
        fewer epochs and a test deviance 0.7 % lower on average (per fit -11 %
        to +2.6 %; ``benchmarks/results/learning_rate.md``); 1e-2 was worse.
    weight_decay : float, default=1e-4
        AdamW weight decay of the network.
    ema_decay : float, default=0.9
        Decay of an exponential moving average of the network's weights, which
        validation, the kept epoch and prediction use (0: the raw weights).
        Averaging smooths the noise of training: on the synthetic suite it
        lowered test deviance on every family tried and halved its spread over
        seeds (e.g. gamma 0.863 +/- 0.080 -> 0.807 +/- 0.036, 4 seeds).
    max_epochs : int, default=300
        Upper bound on training epochs (full-batch steps, or passes over the
        mini-batches when ``batch_size`` is set).
    batch_size : int or None, default=None
        Destination rows per optimiser step (each with its L-hop
        neighbourhood); None trains full-batch up to 30,000 training rows
        and, from there, with 4-8 steps an epoch, each over a part of the
        rows while the other rows' states come from a cache (a 100k-row fit
        takes about half the time, at the same test deviance; thresholds in
        ``fit_policy``). From 250,000 rows a pass, the
        network's activations are recomputed in the backward pass instead of
        kept (activation checkpointing), so a full-batch fit of 1M rows stays
        within a few GiB; mini-batches with k = 16 and 2 layers reach most rows
        through their neighbourhoods and save little memory.
    early_stopping : bool, default=True
        Hold out ``validation_fraction`` of the rows, keep the epoch with the
        best validation deviance, and stop after ``n_iter_no_change`` epochs
        without improvement. If no epoch beats the global GLM, the fitted model
        is the global GLM (``is_global_only_``).
    validation_fraction : float, default=0.1
    n_iter_no_change : int, default=10
        Patience, counted from the global GLM's validation deviance. A
        network that cannot beat the GLM is given up sooner (screening), one
        still recovering steadily runs on, a refresh that raises the
        validation deviance sharply or a best value that creeps down within
        the validation rows' noise ends the fit: the rules and their defaults
        are :class:`~autoglm_graph.policy.FitPolicy`'s (``fit_policy``).
    tol : float, default=1e-4
        Relative improvement of validation deviance that resets the patience.
    callbacks : list or None, default=None
        Objects with ``on_epoch_end(trainer, logs) -> bool`` (True stops).
    device : str, default="auto"
        "auto" (CUDA when available), "cpu", "cuda", ...
    precision : {"auto", "fp32", "bf16", "fp16"}, default="auto"
        Precision of the network under autocast; the GLM deviance and the
        global GLM stay in float32 (float64 for the global fit). ``"auto"`` is
        fp32 on every device: bf16 measured no faster at the network's width
        on a GPU or a CPU and moves results (``docs/decisions/precision.md``).
        fp16 trains with a gradient scaler. A non-finite
        loss skips the step (fp16: the scaler lowers its scale; bf16: training
        falls back to fp32 with a warning); the model never holds NaN.
    random_state : int, RandomState instance or None, default=None
    n_jobs : int or None, default=None
        Threads of torch, BLAS and faiss during ``fit`` and prediction, with
        scikit-learn's meaning: None is 1 unless inside a joblib
        ``parallel_config``, -1 is every core. The caller's settings are
        restored afterwards. One thread by default, so that
        ``GridSearchCV(n_jobs=...)``, several search workers or another
        process on the machine are not oversubscribed (which slowed fits
        5-50x); ``n_jobs=-1`` for one fit on an otherwise idle machine.
    verbose : int, default=0
        Progress bar and messages when > 0.
    fit_policy : FitPolicy or None, default=None
        The tuned rules of a fit (early stopping's screening, recovery,
        refresh-jump and stall rules; cached-state steps; copies of rows; the
        neighbour search's thresholds; activation checkpointing), each a
        default chosen by measurement (:class:`~autoglm_graph.policy.FitPolicy`).
        None: ``FitPolicy()``.
"""

_COMMON_ATTRIBUTES_DOC = """
    feature_names_out_ : ndarray of str
        Names of the global GLM's terms (design columns after preprocessing,
        base levels left out) that ``coef_`` uses.
    base_levels_ : dict
        Each categorical column's base level, as encoded (a string; empty
        with ``categorical_coding="all_levels"``).
    preprocessor_ : TabularPreprocessor
    global_glm_ : GlobalGLM
        The global GLM's solution on the preprocessor's (standardised)
        design, the one the network sees; ``coef_``, ``intercept_``,
        ``local_coef`` and ``coef_table`` map it to the user's units
        (``preprocessor_.design_scaling()``).
    location_effect_ : LocationEffect or None
        The kept location effect (``location_columns``), else None;
        ``location_report_`` holds its chosen ``n_neighbors`` and
        ``coefficient`` and its validation ``gain`` and ``gain_se``, kept or
        not.
    network_ : GraphGLMNet or None
        The trained network (None when the model is the global GLM).
    interval_members_ : list of estimators
        The bootstrap members of ``interval_members`` (empty for 0 and for a
        model that is the global GLM), read by ``local_coef(X, interval=...)``.
    interval_bias_ : ndarray of shape (n_terms,) or None
        Each ``local_coef`` column's estimated root mean squared bias, which
        widens its intervals; None without members, with
        ``IntervalSettings(bias="none")`` or for the multinomial family.
    interval_cov_ : ndarray of shape (n_terms, n_terms) or None
        For a model that is the global GLM fitted with ``interval_members >=
        2``: the GLM's covariance of ``local_coef``'s columns on the training
        data (``coef_table``'s, Fisher), from which ``local_coef(X,
        interval=...)`` gives its Wald intervals; else None.
    is_global_only_ : bool
        True when the fitted model is exactly the global GLM (no network and
        no location effect).
    global_only_reason_ : str or None
    history_ : list of dict
        Per-epoch ``train_loss``, ``train_deviance``, ``val_deviance``, ``seconds``.
    fit_times_ : dict of str to float
        Wall seconds of the last ``fit`` by phase: ``preprocessing``,
        ``global_glm``, ``graphs`` (the training loop's neighbour searches),
        ``steps`` (optimiser steps), ``validation``, ``prediction_index``,
        ``balance``, ``interval_members`` (the bootstrap members' fits),
        ``interval_bias`` (the intervals' bias estimate, or a global GLM's
        covariance), ``other``, and their ``total``. On CUDA each phase ends
        with a synchronisation, so its kernels count in it.
    best_epoch_ : int
        The epoch whose weights were kept (when a network is used).
    validation_gain_, validation_gain_se_ : float
        Validation deviance of the global GLM minus that of the best epoch, and
        its standard error; the network is kept only when the gain exceeds one
        standard error.
    n_iter_ : int
        Epochs run.
    offset_used_ : bool
        Whether ``fit`` got an ``offset``; ``predict`` without one then warns.
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Defined when X was a DataFrame with string column names.
"""


class GraphGLMRegressor(RegressorMixin, BaseGraphGLM):
    __doc__ = f"""Graph-contextualized GLM regressor.

    Every row gets its own GLM coefficients: those of a global GLM plus a
    deviation predicted by a graph attention network over the most similar
    training rows.

    Parameters
    ----------
    family : {{"gaussian", "poisson", "gamma", "tweedie", "negative_binomial", \
"binomial"}} or Family, default="gaussian"
        ``"binomial"`` here is for proportions ``y`` in [0, 1] with
        ``sample_weight`` the numbers of trials (R's ``glm(cbind(s, f) ~ .)``);
        class labels go to :class:`GraphGLMClassifier`.
    power : float, default=1.5
        Tweedie power (used when ``family="tweedie"``): 0 or >= 1.
    theta : float or None, default=None
        Negative binomial dispersion: variance ``mu + theta * mu**2`` (R's
        ``glm.nb`` reports ``1 / theta``; statsmodels calls it ``alpha``).
        None estimates it by maximum likelihood, alternating with the GLM as
        ``MASS::glm.nb`` does (``theta_``); a float keeps it fixed.
    balance : "auto" or bool, default="auto"
        The balance property of actuarial pricing: after fitting, shift the
        intercept so that the fitted model (network included) reproduces the
        observed total on the rows passed to ``fit``, all of them (the early
        stopping split included), ``sum(w * predict(X, offset)) == sum(w * y)``
        to rounding error. The shift is ``log(sum(w * y) / sum(w * mu))`` for
        the log link, ``sum(w * (y - mu)) / sum(w)`` for the identity link; the
        logit link (binomial proportions) is left as fitted. ``"auto"``
        balances the families whose maximum likelihood GLM is balanced already
        (canonical link: poisson, gaussian, tweedie with ``power`` 0 or 1), so
        a network on top reproduces the total and the GLM alone stays exactly
        scikit-learn's. ``True`` also balances gamma, tweedie and negative
        binomial fits, whose maximum likelihood GLMs are not balanced: their
        ``intercept_`` then differs from scikit-learn's and glum's, and the
        test deviance can be slightly worse (measured: 0.01 % at 30k
        policies, up to 1.3 % at 3k, ``benchmarks/results/insurance.md``).
        ``False`` keeps every fit as trained. The shift is
        ``balance_correction_``; ``intercept_``, ``predict``, ``local_coef``
        and ``coef_table`` include it.
    {_COMMON_PARAMS_DOC}
    Attributes
    ----------
    coef_ : ndarray of shape (n_features_out,)
        Slopes of the global GLM, named by ``feature_names_out_``.
    intercept_ : float
    family_ : Family
    theta_ : float
        The negative binomial theta used (estimated when ``theta=None``);
        only for ``family="negative_binomial"``.
    balance_correction_ : float
        The shift added to the intercept by ``balance`` (0.0 when off or not
        applicable).
    {_COMMON_ATTRIBUTES_DOC}
    Examples
    --------
    >>> from autoglm_graph import GraphGLMRegressor
    >>> from autoglm_graph.datasets import make_varying_coefficients
    >>> X, y, _ = make_varying_coefficients(300, 3, family="poisson", random_state=0)
    >>> model = GraphGLMRegressor(family="poisson", max_epochs=5, random_state=0)
    >>> model.fit(X, y).predict(X[:2]).shape
    (2,)
    """

    def __init__(
        self,
        *,
        family: str | Family = "gaussian",
        power: float = 1.5,
        theta: float | None = None,
        balance: str | bool = "auto",
        alpha: float = 1e-4,
        formula: str | None = None,
        splines: bool | list = False,
        splines_local: str = "linear",
        fit_intercept: bool = True,
        categorical_coding: str = "treatment",
        base_levels: dict | None = None,
        min_frequency: float | int | None = None,
        max_categories: int | None = None,
        handle_missing: str = "impute",
        n_neighbors: int = 16,
        threshold: float = 0.0,
        graph_space: str = "embedding",
        graph_refresh: int = 10,
        graph_backend: str = "auto",
        hidden_channels: int = 64,
        heads: int = 4,
        num_layers: int = 2,
        conv: str = "gat",
        message_passing: str = "auto",
        dropout: float = 0.1,
        use_neighbor_targets: bool = True,
        location_columns: list | None = None,
        location_neighbors: int | str = "auto",
        local_penalty: float = 1e-3,
        global_terms: list | None = None,
        local_sign: dict | None = None,
        interval_members: int = 0,
        interval_settings: IntervalSettings | None = None,
        learning_rate: float = 6e-3,
        weight_decay: float = 1e-4,
        ema_decay: float = 0.9,
        max_epochs: int = 300,
        batch_size: int | None = None,
        early_stopping: bool = True,
        validation_fraction: float = 0.1,
        n_iter_no_change: int = 10,
        tol: float = 1e-4,
        callbacks: list | None = None,
        device: str = "auto",
        precision: str = "auto",
        random_state=None,
        n_jobs: int | None = None,
        verbose: int = 0,
        fit_policy: FitPolicy | None = None,
    ) -> None:
        self.family = family
        self.power = power
        self.theta = theta
        self.balance = balance
        super().__init__(
            alpha=alpha,
            formula=formula,
            splines=splines,
            splines_local=splines_local,
            fit_intercept=fit_intercept,
            categorical_coding=categorical_coding,
            base_levels=base_levels,
            min_frequency=min_frequency,
            max_categories=max_categories,
            handle_missing=handle_missing,
            n_neighbors=n_neighbors,
            threshold=threshold,
            graph_space=graph_space,
            graph_refresh=graph_refresh,
            graph_backend=graph_backend,
            hidden_channels=hidden_channels,
            heads=heads,
            num_layers=num_layers,
            conv=conv,
            message_passing=message_passing,
            dropout=dropout,
            use_neighbor_targets=use_neighbor_targets,
            location_columns=location_columns,
            location_neighbors=location_neighbors,
            local_penalty=local_penalty,
            global_terms=global_terms,
            local_sign=local_sign,
            interval_members=interval_members,
            interval_settings=interval_settings,
            learning_rate=learning_rate,
            weight_decay=weight_decay,
            ema_decay=ema_decay,
            max_epochs=max_epochs,
            batch_size=batch_size,
            early_stopping=early_stopping,
            validation_fraction=validation_fraction,
            n_iter_no_change=n_iter_no_change,
            tol=tol,
            callbacks=callbacks,
            device=device,
            precision=precision,
            random_state=random_state,
            n_jobs=n_jobs,
            verbose=verbose,
            fit_policy=fit_policy,
        )

    def _validate_params(self) -> None:
        super()._validate_params()
        check_option("balance", self.balance, ("auto", True, False))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        try:
            family = get_family(self.family, power=self.power, theta=self.theta)
            tags.target_tags.positive_only = family.positive_only
        except (ValueError, TypeError):
            pass
        return tags

    def _encode_target(self, y: np.ndarray) -> np.ndarray:
        if y.dtype.kind in "OUS":  # object or strings: say which value is no number
            numbers = pd.to_numeric(pd.Series(y), errors="coerce")
            bad = numbers.isna() & pd.notna(pd.Series(y))
            if bad.any():
                raise ValueError(
                    f"GraphGLMRegressor needs a numeric y; {int(bad.sum())} value(s) "
                    f"are not numbers, e.g. {y[bad.to_numpy()][0]!r}. For class "
                    "labels use GraphGLMClassifier."
                )
        y = check_array(y, ensure_2d=False, dtype=np.float64, input_name="y")
        return y

    def _make_family(self, y_model: np.ndarray) -> Family:
        family = get_family(self.family, power=self.power, theta=self.theta)
        if family.multi_output:
            raise ValueError(
                f"The {family.name!r} family is for classification; use "
                "GraphGLMClassifier."
            )
        return family

    @property
    def theta_(self) -> float:
        family = self.__dict__.get("family_")
        if not isinstance(family, NegativeBinomialFamily):
            raise AttributeError(
                "theta_ is defined after fitting family='negative_binomial'."
            )
        return family.theta

    def _set_global_coefficients(self, glm) -> None:
        theta = self._global_theta_user()
        self.coef_ = theta[0, 1:].copy()
        self.intercept_ = float(theta[0, 0])

    def fit(
        self, X, y=None, sample_weight=None, offset=None, groups=None
    ) -> GraphGLMRegressor:
        """Fit the global GLM, then the network of per-row deviations.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
            Numeric, categorical and missing values are handled by the
            preprocessing.
        y : array-like of shape (n_samples,), default=None
            Required unless ``formula`` names the target on its left side.
        sample_weight : array-like of shape (n_samples,), default=None
        offset : float or array-like of shape (n_samples,), default=None
            Added to the linear predictor (e.g. log exposure for poisson).
        groups : array-like of shape (n_samples,), default=None
            Units that own several rows (a person observed in several years).
            Each group stays on one side of the validation split, and a
            training row never takes neighbours from its own group, so that
            validation measures what a new unit will get.

        Returns
        -------
        self
        """
        self._fit(X, y, sample_weight, offset, groups)
        fit_intervals(self, X, y, sample_weight, offset, groups)
        return self

    def predict(self, X, offset=None) -> np.ndarray:
        """Predicted mean on the response scale, shape (n_samples,)."""
        eta = self._linear_predictor(X, offset)[:, 0]
        return self.family_.inverse_link(eta)  # numpy: no torch for a GLM

    def predict_linear(self, X, offset=None) -> np.ndarray:
        """The linear predictor ``eta = offset + b_i + x_i . beta_i`` (link scale).

        ``predict(X, offset) == family_.inverse_link(predict_linear(X, offset))``;
        for the log link, ``log(predict(X, offset))``.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
        offset : float or array-like of shape (n_samples,), default=None
            Added to the linear predictor, as in ``fit``.

        Returns
        -------
        ndarray of shape (n_samples,)
        """
        return self._linear_predictor(X, offset)[:, 0]

    def score(self, X, y, sample_weight=None, offset=None) -> float:
        """D^2, the fraction of deviance explained (1 is perfect).

        As scikit-learn's GLMs: ``1 - D(y, predict(X)) / D(y, weighted mean y)``.

        Raises
        ------
        ValueError
            When the model was fitted with an ``offset`` and gets none here: a
            score for offset=0 would be wrong, not merely approximate (this is
            what ``cross_val_score`` does without metadata routing).
        """
        if offset is None and getattr(self, "offset_used_", False):
            raise ValueError(_SCORE_WITHOUT_OFFSET.format(type(self).__name__))
        y = np.array(y, dtype=np.float64)
        eta = self._linear_predictor(X, offset)[:, 0]
        w = None if sample_weight is None else np.array(sample_weight, np.float64)
        null_mu = np.average(y, weights=w)
        null_eta = self.family_.link(np.full_like(y, null_mu))
        deviance = self.family_.deviance(y, eta, w)
        null = self.family_.deviance(y, null_eta, w)
        with np.errstate(divide="ignore", invalid="ignore"):  # NaN for constant y
            return float(1.0 - deviance / null)


#: score() without the offset of fit: how to route it through scikit-learn.
_SCORE_WITHOUT_OFFSET = (
    "This {0} was fitted with an offset, and score got none: the deviance of "
    "predictions for offset=0 is not a score of the model. Pass offset= to score. "
    "In a Pipeline, cross_val_score or GridSearchCV, route the offset to both fit "
    "and score with metadata routing: sklearn.set_config("
    "enable_metadata_routing=True), then "
    "{0}(...).set_fit_request(offset=True).set_score_request(offset=True) and "
    "params={{'offset': offset}} (without routing, params={{'model__offset': "
    "offset}} reaches fit only)."
)


class GraphGLMClassifier(ClassifierMixin, BaseGraphGLM):
    __doc__ = f"""Graph-contextualized GLM classifier (binomial or multinomial).

    The family follows from y: binomial (logit link) for two classes,
    multinomial (softmax) for more. Labels may be strings.

    Parameters
    ----------
    {_COMMON_PARAMS_DOC}
    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    coef_ : ndarray of shape (1, n_features_out) or (n_classes, n_features_out)
        Global GLM slopes (per class for multinomial), as LogisticRegression.
    intercept_ : ndarray of shape (1,) or (n_classes,)
    family_ : Family
    {_COMMON_ATTRIBUTES_DOC}
    Examples
    --------
    >>> from autoglm_graph import GraphGLMClassifier
    >>> from autoglm_graph.datasets import make_varying_coefficients
    >>> X, y, _ = make_varying_coefficients(300, 3, family="binomial", random_state=0)
    >>> model = GraphGLMClassifier(max_epochs=5, random_state=0).fit(X, y)
    >>> model.predict_proba(X[:2]).shape
    (2, 2)
    """

    def _encode_target(self, y: np.ndarray) -> np.ndarray:
        missing = pd.isna(y)
        if missing.any():  # sorting the labels failed on None vs str
            raise ValueError(
                f"Input y has {int(missing.sum())} missing label(s) (row "
                f"{int(np.flatnonzero(missing)[0])} is the first); drop those rows "
                "or give them a label."
            )
        if y.dtype.kind == "O":
            texts = np.fromiter((isinstance(v, str) for v in y), bool, len(y))
            if texts.any() and not texts.all():
                raise ValueError(
                    "The labels in y mix strings and other values (e.g. "
                    f"{y[texts][0]!r} and {y[~texts][0]!r}); give every label "
                    "one type, e.g. y.astype(str)."
                )
        check_classification_targets(y)
        encoder = LabelEncoder().fit(y)
        self.classes_ = encoder.classes_
        if len(self.classes_) < 2:
            raise ValueError(
                "GraphGLMClassifier needs at least 2 classes in y; got 1 class "
                f"({self.classes_.tolist()[0]!r})."  # 1, not np.int64(1)
            )
        codes = encoder.transform(y)
        if len(self.classes_) == 2:
            return codes.astype(np.float64)
        return np.eye(len(self.classes_))[codes]

    def _make_family(self, y_model: np.ndarray) -> Family:
        return get_family("binomial" if y_model.ndim == 1 else "multinomial")

    def _stratify_labels(self, y_model: np.ndarray):
        return y_model if y_model.ndim == 1 else y_model.argmax(axis=1)

    def _set_global_coefficients(self, glm) -> None:
        theta = self._global_theta_user()
        self.coef_ = theta[:, 1:].copy()
        self.intercept_ = theta[:, 0].copy()

    def fit(
        self, X, y=None, sample_weight=None, offset=None, groups=None
    ) -> GraphGLMClassifier:
        """Fit the global GLM, then the network of per-row deviations.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
        y : array-like of shape (n_samples,), default=None
            Class labels (numbers or strings); None when ``formula`` names
            the target on its left side.
        sample_weight : array-like of shape (n_samples,), default=None
        offset : float or array-like of shape (n_samples,), default=None
            Added to the linear predictor (binary: the log-odds).
        groups : array-like of shape (n_samples,), default=None
            Units that own several rows; see ``GraphGLMRegressor.fit``.

        Returns
        -------
        self
        """
        self._fit(X, y, sample_weight, offset, groups)
        fit_intervals(self, X, y, sample_weight, offset, groups)
        return self

    def predict_proba(self, X, offset=None) -> np.ndarray:
        """Class probabilities, shape (n_samples, n_classes)."""
        eta = self._linear_predictor(X, offset)
        return self.family_.predict_proba(eta)

    def predict(self, X, offset=None) -> np.ndarray:
        """Most probable class label per row."""
        proba = self.predict_proba(X, offset)
        return self.classes_[np.argmax(proba, axis=1)]

    def predict_log_proba(self, X, offset=None) -> np.ndarray:
        """Log of the class probabilities, shape (n_samples, n_classes).

        Computed on the link scale (log-sigmoid, log-softmax), so that it is
        finite where ``predict_proba`` rounds to 0.
        """
        eta = self._linear_predictor(X, offset)
        return self.family_.predict_log_proba(eta)

    def decision_function(self, X, offset=None) -> np.ndarray:
        """Confidence scores on the link scale, as ``LogisticRegression``'s.

        Two classes: the log-odds of ``classes_[1]``, shape (n_samples,);
        positive means ``classes_[1]`` is predicted. More classes: the softmax
        scores, shape (n_samples, n_classes), whose argmax is ``predict``.
        The offset is included.
        """
        eta = self._linear_predictor(X, offset)
        return eta[:, 0] if len(self.classes_) == 2 else eta

    def predict_linear(self, X, offset=None) -> np.ndarray:
        """The linear predictor (link scale): ``decision_function``'s values.

        The same name as ``GraphGLMRegressor.predict_linear``: log-odds of
        ``classes_[1]`` (shape (n_samples,)) for two classes, softmax scores
        (shape (n_samples, n_classes)) for more.
        """
        return self.decision_function(X, offset)


register_estimator(GraphGLMRegressor)
register_estimator(GraphGLMClassifier)
