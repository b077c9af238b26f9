"""The registered pipelines: `pretrain` is its two halves, each in its own namespace."""

from __future__ import annotations

import typing

from bert_pipeline.pipeline_registry import register_pipelines


def test_pretrain_halves_are_namespaces_over_the_same_datasets():
    """Namespaced for kedro-viz only: the datasets keep their catalog names, so `pretrain_model`
    reads what `pretrain_data` wrote, and GLUE's per-task namespaces are the only others."""
    pipelines = register_pipelines()
    data, model = pipelines["pretrain_data"], pipelines["pretrain_model"]
    assert {n.namespace for n in data.nodes} == {"pretrain_data"}
    assert {n.namespace for n in model.nodes} == {"pretrain_model"}
    assert "pretrain_model.pretrain_bert" in {n.name for n in pipelines["pretrain"].nodes}
    assert {"tokenizer", "pretraining_examples"} <= data.all_outputs() & model.inputs()
    assert pipelines["pretrain"].inputs() == {"pretrain_corpus"} | {
        i for i in pipelines["pretrain"].inputs() if i.startswith("params:")
    }
    assert "pretrained_model" in model.all_outputs()
    for name in ("finetune_glue", "finetune_ner", "finetune_ner_features", "finetune_squad"):
        namespaces = {n.namespace for n in pipelines[name].nodes} - {None}
        assert not namespaces & {"pretrain_data", "pretrain_model"}, name


def test_every_nodes_annotations_resolve():
    """Kedro's parameter validation evaluates each node's annotations; one naming a type its
    module imports only for type checkers warns on every run and notebook start."""
    for pipeline in register_pipelines().values():
        for node in pipeline.nodes:
            typing.get_type_hints(node.func)
