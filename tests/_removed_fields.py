"""The FitPolicy fields removed in issue #59, as files saved before hold them:
shared by the policy's tests and the model files' (test_policy.py, test_io.py)."""

#: FitPolicy fields removed since (issue #59), with their former default and a
#: value they were fitted with: files saved before hold them.
REMOVED_POLICY_FIELDS = {
    "edge_difference_channels": (0, 16),
    "head_members": (1, 4),
    "refit_all_rows": (False, True),
    "plateau_lr_factor": (1.0, 0.5),
    "plateau_lr_epochs": (3, 0),
    "warmup_epochs": (0, 5),
    "embedding_frequencies": (16, 8),
    "embedding_channels": (8, 4),
    "embedding_sigma": (0.1, 1.0),
    "embedding_keep_values": (False, True),
}


#: FitPolicy fields removed since that were rules of the fit alone (issue #59),
#: with values files were fitted with: any value loads.
REMOVED_FIT_RULES = {
    "keep_check_folds": (0, 5),
    "keep_check_max_rows": (5_000, 20_000),
    "keep_check_standard_errors": (3.0, 1e9),
    "refresh_jump_stop": (float("inf"), 0.005),
    "refresh_gain_epochs": (5, 2),
    "network_baseline": ("all_rows", "training_rows"),
}
