"""Which reviews a machine fine-tunes on (training/sentiment/pipeline.fitted_to): the default's 12,000
wherever training runs under bf16 or the CPU builds the int8 export, 9,000 on a CPU that does
neither (the AVX2 class), and the tests' tiny config the same everywhere."""

from __future__ import annotations

from dataclasses import replace

from training.common.trainer import TrainerOptions
from training.sentiment.config import DEFAULT, TINY
from training.sentiment.pipeline import fitted_to

AVX2 = {"avx2", "fma"}
VNNI = AVX2 | {"avx512f", "avx512_vnni"}
FP32 = TrainerOptions(accelerator="cpu", precision="32-true")
BF16 = TrainerOptions(accelerator="cpu", precision="bf16-mixed")


def test_a_float32_cpu_without_int8_dot_products_fine_tunes_on_9000_reviews():
    fitted = fitted_to(DEFAULT, FP32, AVX2)
    assert fitted.train_size == 9000 == DEFAULT.cpu_fp32_train_size
    assert fitted.cpu_fp32_train_size is None  # the params say what ran, and it stays put
    assert fitted_to(fitted, FP32, AVX2) == fitted
    assert fitted.name == "default"  # still the full-size config the served checks judge


def test_bf16_or_an_int8_building_cpu_keeps_12000():
    assert fitted_to(DEFAULT, BF16, AVX2).train_size == 12000
    assert fitted_to(DEFAULT, FP32, VNNI).train_size == 12000  # its int8 must pass the gate


def test_the_tiny_config_and_always_int8_keep_their_size():
    assert fitted_to(TINY, FP32, AVX2) == TINY
    assert fitted_to(replace(DEFAULT, int8="always"), FP32, AVX2).train_size == 12000
