"""Models written in PyTorch for the superkernel backend (the samples users start from).

``superkernel.models.longcat_flash``: LongCat-Flash decode and prefill with three fusion scopes per
layer, and its attention-FFN disaggregated FFN model. ``superkernel.models.run_config``: the YAML
run configs of the ``superkernel`` command line, for ``python -m superkernel``.
"""
