"""The project's pipelines, one package each (`nodes.py`, `pipeline.py`).

The nodes import torch, lightning, Dask's dataframe and matplotlib inside their functions:
every `kedro` command builds the pipelines, and a run with a bad parameter is refused right
after building them (`bert_pipeline.cli`), so building them must load none of these. Kedro
evaluates each node's annotations (`typing.get_type_hints`, for its parameter validation), so
a node is annotated only with types its module imports: a Dask collection is `DaskCollection`.
"""
