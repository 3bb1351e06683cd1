"""Saving, loading and pickling a fitted estimator (:class:`_PersistenceMixin`).

:mod:`autoglm_graph.io` writes and reads the files; these methods are what
it asks of an estimator: the fitted state it saves (:meth:`_save_state`), a
checked estimator from saved parameters (:meth:`_from_params`) and the
restored state (:meth:`_restore`). io imports no estimator: the classes are
registered with :func:`autoglm_graph._saving.register_estimator`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..persistence import save_model
from ..utils import resolve_device, torch

if TYPE_CHECKING:
    from ..network import FittedNetwork


class _PersistenceMixin:
    """Persistence of :class:`~autoglm_graph._base.BaseGraphGLM`."""

    def save(self, path):
        """Save the fitted model without pickle; read it with ``autoglm_graph.load``.

        See :func:`autoglm_graph.io.save_model`: safetensors and JSON (and
        skops for the preprocessing), in a directory or a ``.zip`` file.

        Parameters
        ----------
        path : str or path-like
            A directory, or a file whose name ends in ``.zip``.

        Returns
        -------
        pathlib.Path
            The path written.

        Notes
        -----
        The bootstrap members of ``interval_members`` and the bias estimate
        of ``interval_settings`` are saved with the model, so that the loaded
        model's ``local_coef(X, interval=...)`` is the same.
        """
        return save_model(self, path)

    def _save_state(self) -> tuple:
        """What a saved model keeps besides the public attributes: the
        training rows' labels and the fitted network (or None)."""
        return self._train_index, self._fitted

    @classmethod
    def _from_params(cls, params: dict):
        """An unfitted estimator of saved parameters, validated as ``fit`` does."""
        model = cls(**params)
        model._validate_params()
        return model

    def _restore(self, global_glm, train_index, network: FittedNetwork | None):
        """Set the fitted state that a saved model's reader rebuilt (the
        public attributes aside): the global GLM, the training rows' labels
        and the fitted network."""
        self.global_glm_ = global_glm
        self._set_global_coefficients(global_glm)
        self._train_index = train_index
        self._fitted = network
        self._validation_positions = None  # not saved: only a search reads it
        self.network_ = None if network is None else network.net
        self.interval_members_ = []  # the reader sets the saved members after
        self.interval_bias_ = None  # and the saved bias estimate

    def __getstate__(self):
        # The fitted network pickles through its state() (tensors on the CPU);
        # network_ is its net, restored with it.
        state = self.__dict__.copy()
        if state.get("_fitted") is not None:
            state["network_"] = None
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        if "device_" in state:
            try:
                self.device_ = resolve_device(self.device)
            except ValueError:  # e.g. fitted on a GPU, loaded where there is none
                self.device_ = torch.device("cpu")
        if getattr(self, "_fitted", None) is not None:
            self._fitted = self._fitted.to(self.device_)
            self.network_ = self._fitted.net
