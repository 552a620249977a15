"""Excerpts of published checkpoint configs, one per quantization method the parser covers.

Each excerpt keeps the keys of the published file that the parser reads (model shape, MoE
fields, the whole quantization config; long ignore lists shortened with a comment). The repo
each one comes from is named beside it; where a method has no public checkpoint kernelpolicy
could cite, the producer whose format it follows is named instead.
"""

from __future__ import annotations

from typing import Any

# huggingface.co/Qwen/Qwen3-30B-A3B-FP8/blob/main/config.json
QWEN3_30B_A3B_FP8: dict[str, Any] = {
    "architectures": ["Qwen3MoeForCausalLM"],
    "model_type": "qwen3_moe",
    "hidden_act": "silu",
    "hidden_size": 2048,
    "intermediate_size": 6144,
    "moe_intermediate_size": 768,
    "norm_topk_prob": True,
    "num_experts": 128,
    "num_experts_per_tok": 8,
    "torch_dtype": "bfloat16",
    "quantization_config": {
        "activation_scheme": "dynamic",
        "fmt": "e4m3",
        "quant_method": "fp8",
        "weight_block_size": [128, 128],
    },
}

# huggingface.co/deepseek-ai/DeepSeek-V3/blob/main/config.json
DEEPSEEK_V3: dict[str, Any] = {
    "architectures": ["DeepseekV3ForCausalLM"],
    "model_type": "deepseek_v3",
    "hidden_act": "silu",
    "hidden_size": 7168,
    "intermediate_size": 18432,
    "moe_intermediate_size": 2048,
    "n_routed_experts": 256,
    "n_shared_experts": 1,
    "num_experts_per_tok": 8,
    "n_group": 8,
    "topk_group": 4,
    "topk_method": "noaux_tc",
    "scoring_func": "sigmoid",
    "norm_topk_prob": True,
    "torch_dtype": "bfloat16",
    "quantization_config": {
        "activation_scheme": "dynamic",
        "fmt": "e4m3",
        "quant_method": "fp8",
        "weight_block_size": [128, 128],
    },
}

# huggingface.co/neuralmagic/Mixtral-8x7B-Instruct-v0.1-FP8/blob/main/config.json (AutoFP8)
MIXTRAL_FP8_STATIC: dict[str, Any] = {
    "architectures": ["MixtralForCausalLM"],
    "model_type": "mixtral",
    "hidden_act": "silu",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_local_experts": 8,
    "num_experts_per_tok": 2,
    "torch_dtype": "bfloat16",
    "quantization_config": {
        "activation_scheme": "static",
        "ignored_layers": ["lm_head", "model.layers.0.block_sparse_moe.gate"],  # one gate per layer
        "quant_method": "fp8",
    },
}

# huggingface.co/meta-llama/Llama-3.1-405B-Instruct-FP8/blob/main/config.json (FBGEMM)
LLAMA_405B_FBGEMM: dict[str, Any] = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_act": "silu",
    "hidden_size": 16384,
    "intermediate_size": 53248,
    "torch_dtype": "bfloat16",
    "quantization_config": {
        "activation_scale_ub": 1200.0,
        "modules_to_not_convert": ["model.layers.0.mlp.down_proj", "lm_head"],  # shortened
        "quant_method": "fbgemm_fp8",
    },
}

_LLAMA_8B: dict[str, Any] = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_act": "silu",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "torch_dtype": "bfloat16",
}

# huggingface.co/RedHatAI/Meta-Llama-3.1-8B-Instruct-FP8-dynamic/blob/main/config.json
LLAMA_8B_CT_FP8_DYNAMIC: dict[str, Any] = {
    **_LLAMA_8B,
    "quantization_config": {
        "config_groups": {
            "group_0": {
                "input_activations": {
                    "dynamic": True,
                    "num_bits": 8,
                    "strategy": "token",
                    "symmetric": True,
                    "type": "float",
                },
                "targets": ["Linear"],
                "weights": {
                    "dynamic": False,
                    "num_bits": 8,
                    "strategy": "channel",
                    "symmetric": True,
                    "type": "float",
                },
            }
        },
        "format": "float-quantized",
        "ignore": ["lm_head"],
        "quant_method": "compressed-tensors",
        "quantization_status": "compressed",
    },
}

# huggingface.co/neuralmagic/Meta-Llama-3.1-8B-Instruct-FP8/blob/main/config.json
LLAMA_8B_CT_FP8_STATIC: dict[str, Any] = {
    **_LLAMA_8B,
    "quantization_config": {
        "config_groups": {
            "group_0": {
                "input_activations": {
                    "dynamic": False,
                    "num_bits": 8,
                    "strategy": "tensor",
                    "symmetric": True,
                    "type": "float",
                },
                "targets": ["Linear"],
                "weights": {
                    "dynamic": False,
                    "num_bits": 8,
                    "strategy": "tensor",
                    "symmetric": True,
                    "type": "float",
                },
            }
        },
        "format": "naive-quantized",
        "ignore": ["lm_head"],
        "quant_method": "compressed-tensors",
    },
}

# huggingface.co/RedHatAI/gemma-4-31B-it-FP8-block/blob/main/config.json (as in rules/models.yaml)
GEMMA4_CT_FP8_BLOCK: dict[str, Any] = {
    "architectures": ["Gemma4ForConditionalGeneration"],
    "model_type": "gemma4",
    "text_config": {
        "model_type": "gemma4_text",
        "hidden_size": 5376,
        "intermediate_size": 21504,
        "hidden_activation": "gelu_pytorch_tanh",
    },
    "quantization_config": {
        "config_groups": {
            "group_0": {
                "input_activations": {
                    "dynamic": True,
                    "group_size": 128,
                    "num_bits": 8,
                    "strategy": "group",
                    "symmetric": True,
                    "type": "float",
                },
                "targets": ["Linear"],
                "weights": {
                    "block_structure": [128, 128],
                    "dynamic": False,
                    "num_bits": 8,
                    "strategy": "block",
                    "symmetric": True,
                    "type": "float",
                },
            }
        },
        "format": "float-quantized",
        "ignore": ["lm_head"],
        "quant_method": "compressed-tensors",
    },
}

# huggingface.co/RedHatAI/Qwen3-30B-A3B-NVFP4/blob/main/config.json (llm-compressor NVFP4)
QWEN3_30B_CT_NVFP4: dict[str, Any] = {
    **{k: v for k, v in QWEN3_30B_A3B_FP8.items() if k != "quantization_config"},
    "quantization_config": {
        "config_groups": {
            "group_0": {
                "input_activations": {
                    "dynamic": "local",
                    "group_size": 16,
                    "num_bits": 4,
                    "strategy": "tensor_group",
                    "symmetric": True,
                    "type": "float",
                },
                "targets": ["Linear"],
                "weights": {
                    "dynamic": False,
                    "group_size": 16,
                    "num_bits": 4,
                    "strategy": "tensor_group",
                    "symmetric": True,
                    "type": "float",
                },
            }
        },
        "format": "nvfp4-pack-quantized",
        "ignore": ["lm_head", "re:.*mlp.gate$"],
        "quant_method": "compressed-tensors",
    },
}

# huggingface.co/RedHatAI/Meta-Llama-3.1-8B-Instruct-quantized.w4a16/blob/main/config.json
LLAMA_8B_CT_W4A16: dict[str, Any] = {
    **_LLAMA_8B,
    "quantization_config": {
        "config_groups": {
            "group_0": {
                "input_activations": None,
                "targets": ["Linear"],
                "weights": {
                    "dynamic": False,
                    "group_size": 128,
                    "num_bits": 4,
                    "strategy": "group",
                    "symmetric": True,
                    "type": "int",
                },
            }
        },
        "format": "pack-quantized",
        "ignore": ["lm_head"],
        "quant_method": "compressed-tensors",
    },
}

# the W4AFP8 preset of llm-compressor (vllm-project/llm-compressor, quantization scheme presets):
# int4 group-128 weights, FP8 per-token dynamic activations; no public checkpoint is cited
LLAMA_8B_CT_W4AFP8: dict[str, Any] = {
    **_LLAMA_8B,
    "quantization_config": {
        "config_groups": {
            "group_0": {
                "input_activations": {"dynamic": True, "num_bits": 8, "strategy": "token", "type": "float"},
                "targets": ["Linear"],
                "weights": {"group_size": 128, "num_bits": 4, "strategy": "group", "symmetric": True, "type": "int"},
            }
        },
        "format": "pack-quantized",
        "ignore": ["lm_head"],
        "quant_method": "compressed-tensors",
    },
}

# huggingface.co/nvidia/Llama-3.1-8B-Instruct-FP8: config.json has no quantization_config, the
# method is in hf_quant_config.json (ModelOpt)
NVIDIA_LLAMA_8B_FP8 = dict(_LLAMA_8B)
NVIDIA_LLAMA_8B_FP8_HF_QUANT: dict[str, Any] = {
    "producer": {"name": "modelopt", "version": "0.15.0"},
    "quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": "FP8"},
}

# huggingface.co/nvidia/DeepSeek-R1-FP4/blob/main/hf_quant_config.json (config.json: DeepSeek-V3's)
NVIDIA_DEEPSEEK_R1_FP4 = {k: v for k, v in DEEPSEEK_V3.items() if k != "quantization_config"}
NVIDIA_DEEPSEEK_R1_FP4_HF_QUANT: dict[str, Any] = {
    "producer": {"name": "modelopt", "version": "0.23.0"},
    "quantization": {
        "quant_algo": "NVFP4",
        "kv_cache_quant_algo": None,
        "group_size": 16,
        "exclude_modules": ["lm_head"],  # shortened (every layer's self_attn, mlp.gate)
    },
}

# ModelOpt's FP8_PB_WO (block-128 FP8 weights, BF16 activations) and MIXED_PRECISION shapes as
# vLLM's `modelopt.py` reads them (ModelOptFp8PbWoConfig, ModelOptMixedPrecisionConfig); quantized
# with nvidia/Model-Optimizer, no public checkpoint is cited
MODELOPT_FP8_PB_WO: dict[str, Any] = {
    **{k: v for k, v in DEEPSEEK_V3.items() if k != "quantization_config"},
    "quantization_config": {"quant_method": "modelopt", "quant_algo": "FP8_PB_WO", "kv_cache_quant_algo": None},
}
MODELOPT_MIXED: dict[str, Any] = {
    **{k: v for k, v in QWEN3_30B_A3B_FP8.items() if k != "quantization_config"},
    "quantization_config": {
        "quant_method": "modelopt",
        "quant_algo": "MIXED_PRECISION",
        "quantized_layers": {
            "model.layers.0.self_attn.qkv_proj": {"quant_algo": "FP8"},
            "model.layers.0.self_attn.o_proj": {"quant_algo": "FP8"},
            "model.layers.0.mlp.experts.0.gate_proj": {"quant_algo": "NVFP4", "group_size": 16},
            "model.layers.0.mlp.experts.0.down_proj": {"quant_algo": "NVFP4", "group_size": 16},
        },
    },
}
MODELOPT_MXFP8: dict[str, Any] = {
    **_LLAMA_8B,
    "quantization_config": {"quant_method": "modelopt", "quant_algo": "MXFP8", "group_size": 32},
}

# huggingface.co/openai/gpt-oss-20b/blob/main/config.json
GPT_OSS_20B: dict[str, Any] = {
    "architectures": ["GptOssForCausalLM"],
    "model_type": "gpt_oss",
    "hidden_act": "silu",
    "hidden_size": 2880,
    "intermediate_size": 2880,
    "num_local_experts": 32,
    "num_experts_per_tok": 4,
    "experts_per_token": 4,
    "torch_dtype": "bfloat16",
    "quantization_config": {
        "modules_to_not_convert": [
            "model.layers.*.self_attn",
            "model.layers.*.mlp.router",
            "model.embed_tokens",
            "lm_head",
        ],
        "quant_method": "mxfp4",
    },
}

# huggingface.co/Qwen/Qwen2.5-7B-Instruct-GPTQ-Int4/blob/main/config.json
QWEN25_7B_GPTQ: dict[str, Any] = {
    "architectures": ["Qwen2ForCausalLM"],
    "model_type": "qwen2",
    "hidden_act": "silu",
    "hidden_size": 3584,
    "intermediate_size": 18944,
    "torch_dtype": "float16",
    "quantization_config": {
        "bits": 4,
        "damp_percent": 0.01,
        "desc_act": False,
        "group_size": 128,
        "modules_in_block_to_quantize": None,
        "quant_method": "gptq",
        "static_groups": False,
        "sym": True,
        "true_sequential": True,
    },
}

# huggingface.co/Qwen/Qwen2.5-7B-Instruct-AWQ/blob/main/config.json
QWEN25_7B_AWQ: dict[str, Any] = {
    **{k: v for k, v in QWEN25_7B_GPTQ.items() if k != "quantization_config"},
    "quantization_config": {
        "bits": 4,
        "group_size": 128,
        "modules_to_not_convert": None,
        "quant_method": "awq",
        "version": "gemm",
        "zero_point": True,
    },
}

# huggingface.co/unsloth/llama-3-8b-bnb-4bit/blob/main/config.json
LLAMA3_BNB_4BIT: dict[str, Any] = {
    **_LLAMA_8B,
    "quantization_config": {
        "_load_in_4bit": True,
        "_load_in_8bit": False,
        "bnb_4bit_compute_dtype": "bfloat16",
        "bnb_4bit_quant_type": "nf4",
        "bnb_4bit_use_double_quant": True,
        "load_in_4bit": True,
        "load_in_8bit": False,
        "quant_method": "bitsandbytes",
    },
}

# huggingface.co/meta-llama/Llama-4-Scout-17B-16E-Instruct/blob/main/config.json (multimodal wrapper)
LLAMA4_SCOUT: dict[str, Any] = {
    "architectures": ["Llama4ForConditionalGeneration"],
    "model_type": "llama4",
    "text_config": {
        "model_type": "llama4_text",
        "hidden_act": "silu",
        "hidden_size": 5120,
        "intermediate_size": 8192,
        "intermediate_size_mlp": 16384,
        "num_local_experts": 16,
        "num_experts_per_tok": 1,
        "torch_dtype": "bfloat16",
    },
    "torch_dtype": "bfloat16",
}
