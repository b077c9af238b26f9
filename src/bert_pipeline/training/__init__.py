"""BERT pretraining and fine-tuning with Lightning, usable without Kedro (the pipeline nodes are
thin wrappers): `config` (typed settings, no ML framework), `trainer.run_training` (pretraining),
`finetune` (the shared fine-tuning core), `launch` (torchrun / srun entry point)."""
