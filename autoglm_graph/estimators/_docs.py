"""The parameters and attributes the two estimators share, as their
docstrings list them (:class:`~autoglm_graph.GraphGLMRegressor` and
:class:`~autoglm_graph.GraphGLMClassifier` format them in)."""

COMMON_PARAMS_DOC = """
    alpha : float, default=1e-6
        L2 penalty of the global GLM's slopes, as in scikit-learn's
        ``PoissonRegressor``: the global GLM minimises
        ``(1/sum(w)) sum_i w_i unit_deviance_i / 2 + alpha/2 ||beta||^2``,
        with ``beta`` the slopes in the user's units (``coef_``: per unit of
        each numeric column) and the intercept not penalised. A categorical
        column pays for its levels' spread, ``sum_l (e_l - mean(e))^2`` over
        its levels' effects ``e`` (the base level's 0 among them): the ridge
        on every level's indicator, so the GLM does not depend on which level
        is the base, and a ``DataFrame``, a formula's ``C(column)``,
        ``categorical_coding="all_levels"`` and scikit-learn's or glum's
        (``drop_first=False``) one-hot GLM at the same ``alpha`` are one GLM.
        ``LogisticRegression(C=1 / (n * alpha))`` and ``Ridge(alpha=n *
        alpha)`` have the same objective (unit weights). The default only
        identifies what the data leave unidentified (an empty level, a
        separated class): compared with the unpenalised GLM (statsmodels'), a
        coefficient moves by about ``alpha * sum(w) * |u| * se`` of its
        standard errors (``u`` its deviation from its column's mean, ``se``
        its standard error), under 0.002 on 5,000 rows with levels of 10
        rows, and the standard errors by as little
        (``docs/decisions/alpha.md``). ``alpha=0`` is the unpenalised GLM.
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
        (:mod:`autoglm_graph.network.fused`; ``conv="gat"`` only), equal to the
        torch_geometric layer to float rounding and several times faster on a
        CPU, with ``GATConv``'s weights and initial draws and without importing
        torch_geometric; ``"pyg"``: torch_geometric's layer (the reference).
        ``"auto"``: the fast path where it exists.
    numeric_embedding : {"piecewise_linear", "linear"}, default="piecewise_linear"
        How the network's encoder reads the numeric columns (the context's
        columns other than 0/1 indicators). ``"linear"``: as they are, through
        its first linear layer. ``"piecewise_linear"``: each becomes one value
        per quantile bin of the training rows (PLE, Gorishniy et al. 2022;
        ``FitPolicy.embedding_bins``), the encoder starting from the linear
        encoder's function, so that the coefficients can bend where a column's
        effect does. The GLM's terms are the user's columns either way.
        ``"piecewise_linear"`` is the default: over the benchmark suite's 17
        datasets its mean test deviance is 1.4 % lower than the linear
        encoder's, and no dataset's worse by more than 0.5 % or one standard
        error (``docs/decisions/numeric_embedding.md``).
    dropout : float, default=0.1
        Dropout on hidden states and attention weights. With ``dropout=0`` the
        training forward pass doubles as the validation pass (faster), but the
        benchmark suite's test deviance is better with 0.1: ``diamonds`` stops
        early more often without it (``docs/decisions/dropout.md``).
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
        (:mod:`autoglm_graph.network.location`). It is kept only when it lowers the
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
        gives exactly the global GLM (no network is trained). 1e-3: 1e-4,
        3e-3 and 1e-2 moved no suite dataset beyond its noise
        (``docs/decisions/local_penalty.md``).
    global_terms : list of str or None, default=None
        Terms whose coefficient is the same for every row (a regulated or
        protected factor): names in ``feature_names_out_``, categorical input
        columns (all their levels) or ``"intercept"`` (constant in the user's
        units). The network outputs no deviation for them, so ``local_coef``
        has no spread there on any rows (:mod:`autoglm_graph.network.constraints`).
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
        (:mod:`autoglm_graph.explain.intervals`). A fitted model that is the global
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
        AdamW weight decay of the network (1e-3 moved no suite dataset beyond
        its noise, ``docs/decisions/weight_decay.md``).
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
        is the global model (``is_global_only_``): the GLM, or the GAM with
        splines on its numeric columns where that beats it cross-fitted on
        all rows (``FitPolicy.fallback``, ``docs/decisions/gam_fallback.md``).
    validation_fraction : float, default=0.1
        Share of the rows held out to choose the epoch and to decide whether
        the network is kept (whole groups with ``groups``). 0.2 cost the
        networks that need their training rows (``diamonds`` +50 %,
        ``docs/decisions/validation_fraction.md``).
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
        The tuned rules of a fit (early stopping's screening, recovery and
        stall rules; cached-state steps; copies of rows; the
        neighbour search's thresholds; activation checkpointing), each a
        default chosen by measurement (:class:`~autoglm_graph.policy.FitPolicy`).
        None: ``FitPolicy()``.
"""

COMMON_ATTRIBUTES_DOC = """
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
    glm_statistics_ : GLMStatistics or None
        The global GLM's figures on the training rows, for every ``cov_type``
        and ``weights``: the coefficients' covariances (``n_coef x n_coef``)
        and the summary's scalars, no per-row array; what ``summary()``,
        ``coef_table()`` and ``wald_test_terms()`` report without data. None
        for a model loaded from a file written before it was kept (those
        calls then need the training data) and for an interval member.
    is_global_only_ : bool
        True when the fitted model is exactly the global GLM (no network and
        no location effect), or the GAM that replaced it where the network
        was dropped (``FitPolicy.fallback``).
    global_only_reason_ : str or None
        Why the fitted model is global (None: it is not), naming the GAM
        where one replaced the GLM.
    history_ : list of dict
        Per-epoch ``train_loss``, ``train_deviance``, ``val_deviance``, ``seconds``.
    fit_times_ : dict of str to float
        Wall seconds of the last ``fit`` by phase: ``preprocessing``,
        ``global_glm`` (its solve, a GAM fallback's, and ``glm_statistics_``),
        ``graphs`` (the training loop's neighbour searches),
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
