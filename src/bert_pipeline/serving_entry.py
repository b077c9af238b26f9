"""The pyfunc model's code file (MLflow "models from code"): `log_bert_model` logs this file."""

import mlflow

from bert_pipeline.serving import BertPyfunc

mlflow.models.set_model(BertPyfunc())
