"""Run by Pax's own interpreter (Python 3.10, jax 0.4.26), never imported by the harness: the Pax experiment
that trains a jaxbench recipe, built from the settings the pax backend wrote (harness/backends/pax.py) and
registered under this module's name, so that `paxml.main --exp=pax_experiment.RecipeExperiment` finds it.

Praxis' transformer language model is configured as the recipe's model (LLaMA 2: RMSNorm, gated SiLU MLP,
rotary positions, grouped-query attention, untied embeddings, no biases; GPT-3: LayerNorm, GELU MLP with
biases, learned positions, tied embeddings), trained by Pax's Adam with decoupled weight decay, the
recipe's warmup-then-cosine schedule and global-norm clip, on the recipe's own token walk (a file).
"""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np
from jax import numpy as jnp
from paxml import base_experiment, experiment_registry, tasks_lib
from paxml.tasks.lm import model_params
from praxis import base_input, base_layer, layers, optimizers, pax_fiddle, py_utils, schedules
from praxis.layers import activations, grouped_query_attention

SETTINGS_VARIABLE = "JAXBENCH_PAX_SETTINGS"
DTYPES = {"float32": jnp.float32, "bfloat16": jnp.bfloat16}


def settings() -> dict[str, Any]:
    with open(os.environ[SETTINGS_VARIABLE]) as handle:
        loaded: dict[str, Any] = json.load(handle)
    return loaded


class TokenWalk(base_input.BaseInput):
    """Consecutive windows of seq_len + 1 tokens of the recipe's walk (a .npy file), a global batch a step:
    the model reads the first seq_len of each and predicts the last seq_len."""

    path: str = ""
    seq_len: int = 0
    _tokens: Any = None
    _position: int = 0

    def __post_init__(self) -> None:
        super().__post_init__()
        self._tokens = np.load(self.path, mmap_mode="r")
        self._position = 0

    def get_next(self) -> py_utils.NestedMap:
        rows, width = self.batch_size, self.seq_len + 1
        if self._position + rows * width > len(self._tokens):
            raise StopIteration
        window = np.asarray(self._tokens[self._position : self._position + rows * width], np.int32)
        self._position += rows * width
        window = window.reshape(rows, width)
        shape = (rows, self.seq_len)
        return py_utils.NestedMap(
            ids=window[:, :-1],
            labels=window[:, 1:],
            weights=np.ones(shape, np.float32),
            paddings=np.zeros(shape, np.float32),
        )


def _transformer_layer(model: dict[str, Any]) -> pax_fiddle.Config[layers.Transformer]:
    layer = pax_fiddle.Config(layers.Transformer, norm_policy="pre")
    feed_forward = layer.tr_fflayer_tpl
    if model["family"] == "llama2":
        layer.ln_tpl = pax_fiddle.Config(layers.RmsNorm, epsilon=model["norm_eps"])
        feed_forward.ln_tpl = pax_fiddle.Config(layers.RmsNorm, epsilon=model["norm_eps"])
        feed_forward.use_gated_activation = True
        feed_forward.activation_tpl = pax_fiddle.Config(activations.Swish)
        feed_forward.has_bias = False
    else:
        layer.ln_tpl.epsilon = model["norm_eps"]
        feed_forward.ln_tpl.epsilon = model["norm_eps"]
        layer.tr_atten_tpl.use_bias = True
        layer.tr_atten_tpl.combine_qkv = True
        layer.tr_atten_tpl.internal_enable_per_dim_scale = False  # queries scaled by 1/sqrt(head_dim)
        # The tanh approximation, as GPT-2 and GPT-3 use.
        feed_forward.activation_tpl = pax_fiddle.Config(activations.GELU, approximate=True)
        feed_forward.has_bias = True
    return layer


def language_model(model: dict[str, Any], remat: str) -> pax_fiddle.Config[layers.TransformerLm]:
    lm = pax_fiddle.Config(
        layers.TransformerLm, model_dims=model["d_model"], vocab_size=model["vocab_size"], packed_input=False
    )
    block = pax_fiddle.Config(
        layers.StackedTransformer,
        model_dims=model["d_model"],
        hidden_dims=model["ffn_dim"],
        num_layers=1,
        num_heads=model["num_heads"],
        dim_per_head=model["d_model"] // model["num_heads"],
        transformer_layer_params_tpl=_transformer_layer(model),
    )
    # One block scanned num_layers times, its activations saved as the recipe's remat policy says.
    lm.stacked_transformer_tpl = pax_fiddle.Config(
        layers.StackedTransformerRepeated,
        block=block,
        x_times=model["num_layers"],
        checkpoint_policy=layers.AutodiffCheckpointType(remat),
    )
    if model["family"] == "llama2":
        lm.position_emb_tpl = None
        lm.separate_embedding_tpl = pax_fiddle.Config(layers.Embedding)
        lm.softmax_tpl = pax_fiddle.Config(layers.FullSoftmax)
        lm.final_ln_tpl = pax_fiddle.Config(layers.RmsNorm, epsilon=model["norm_eps"])
    else:
        lm.position_emb_tpl = pax_fiddle.Config(
            layers.TrainablePositionalEmbedding, max_seq_length=model["seq_len"]
        )
        lm.softmax_tpl = pax_fiddle.Config(layers.SharedEmbeddingSoftmax)
        lm.final_ln_tpl.epsilon = model["norm_eps"]
    lm.softmax_tpl.soft_cap_logits = None
    lm.softmax_tpl.feed_forward_tpl.has_bias = False  # the output projection has no bias in either
    return lm


def optimizer(opt: dict[str, Any]) -> pax_fiddle.Config[optimizers.BaseOptimizer]:
    adam = pax_fiddle.Config(
        optimizers.Adam,
        beta1=opt["b1"],
        beta2=opt["b2"],
        epsilon=opt["eps"],
        epsilon_root=0.0,
        clip_threshold=0.0,  # Adam's own update capping: not in the recipe
        learning_rate=opt["learning_rate"],
        # Norms' scales and biases are in praxis' skip-regularization collection: no decay, as native.
        decoupled_weight_decay=opt["weight_decay"] or None,
        clip_gradient_norm_to_value=opt["grad_clip"] or 0.0,
    )
    adam.lr_schedule = pax_fiddle.Config(
        schedules.LinearRampupCosineDecay,
        warmup_steps=opt["warmup_steps"],
        decay_start=opt["warmup_steps"],
        decay_end=opt["decay_steps"],
        min_ratio=opt["min_lr_ratio"],
        max=1.0,
    )
    return adam


@experiment_registry.register
class RecipeExperiment(base_experiment.BaseExperiment):
    def datasets(self) -> list[pax_fiddle.Config[base_input.BaseInput]]:
        run = settings()
        return [
            pax_fiddle.Config(
                TokenWalk,
                name="train",
                path=run["data"]["tokens"],
                seq_len=run["model"]["seq_len"],
                batch_size=run["train"]["global_batch"],
                is_training=True,
            )
        ]

    def task(self) -> pax_fiddle.Config[tasks_lib.SingleTask]:
        run = settings()
        model, train = run["model"], run["train"]
        task = pax_fiddle.Config(tasks_lib.SingleTask, name="jaxbench")
        task.model = pax_fiddle.Config(layers.LanguageModel, name="lm")
        task.model.lm_tpl = language_model(model, train["remat"])
        task.model.fprop_dtype = DTYPES[train["dtype"]]
        task.model.params_init = base_layer.WeightInit.Gaussian(0.02)
        learner = task.train.learner
        learner.loss_name = "total_loss"
        learner.optimizer = optimizer(run["optimizer"])
        learner.repeat_prefix_sep = "_"
        task.train.num_train_steps = train["steps"]
        task.train.random_seed = train["seed"]
        # A line of loss and of steps/sec for every step (jaxbench reads both), no evaluation, and no
        # checkpoint before the end.
        task.train.summary_interval_steps = 1
        task.train.compute_steps_per_sec_interval_steps = 1
        task.train.log_train_output_interval_steps = 1
        task.train.eval_interval_steps = 0
        task.train.save_interval_steps = 10**9
        task.summary_verbosity = 0
        model_params.set_sharding_annotations_v1(task, True, run["mesh"]["ici"], [1, 1, 1])
        if model["family"] == "llama2":
            grouped_query(task.model.lm_tpl, model)
        return task


def grouped_query(lm: pax_fiddle.Config[layers.TransformerLm], model: dict[str, Any]) -> None:
    """LLaMA's attention: grouped-query with rotary positions, no biases. Praxis' sharding helper knows only
    its dot-product attention, so this one replaces it afterwards and is sharded here: weights [embed, heads,
    head_dim] over (data, mdl), activations over the batch axes and heads."""
    layer = lm.stacked_transformer_tpl.block.transformer_layer_params_tpl
    layer.tr_atten_tpl = pax_fiddle.Config(
        grouped_query_attention.GroupedQueryAttention,
        num_kv_heads=model["num_kv_heads"],
        use_bias=False,
        rope_min_max_timescales=(1, model["rope_theta"]),
    )
    batch = ("replica", "data")
    layer.tr_atten_tpl.weight_split_dims_mapping.dnh = ["data", "mdl", None]
    activations_mapping = layer.tr_atten_tpl.activation_split_dims_mapping
    activations_mapping.btd = [batch, None, None]
    activations_mapping.btnh = [batch, None, "mdl", None]
    activations_mapping.bskh = [batch, None, "mdl", None]
