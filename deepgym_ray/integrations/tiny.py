"""A tiny causal language model and tokenizer built locally, for CPU smoke runs of a trainer.

Nothing is downloaded: a byte-level BPE tokenizer is trained on a small corpus (the tasks you
pass plus a little Python) and a randomly initialised Qwen2-style model of a few thousand
parameters is saved next to it. It writes gibberish, which is all a test of the training loop
needs: every completion still goes through the sandbox and the verifier.

Needs ``torch``, ``transformers`` and ``tokenizers`` (installed with TRL).

Example:
    path = build_tiny_model("/tmp/tiny-model", texts=["Write solve(x)."])
    from transformers import AutoModelForCausalLM
    AutoModelForCausalLM.from_pretrained(path)
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

__all__ = ["CHAT_TEMPLATE", "build_tiny_model", "teach_tiny_model"]

# Text that teaches the tokenizer the pieces of Python code, so completions look like code.
_PYTHON_CORPUS = [
    "def solve(x):\n    return x\n",
    "```python\ndef f(a, b):\n    return a + b\n```\n",
    "for i in range(10):\n    if i % 2 == 0:\n        print(i)\n",
    "import sys\nclass Solution:\n    def run(self, nums):\n        return sorted(nums)\n",
    "while True:\n    break\nx = [1, 2, 3]\ny = {'a': 1}\n",
]

# A minimal ChatML-style template, so conversational prompts work too.
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{{ message['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

_SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def build_tiny_model(
    path: str | Path,
    texts: Iterable[str] = (),
    *,
    vocab_size: int = 400,
    hidden_size: int = 32,
    num_layers: int = 2,
    seed: int = 0,
    chat_template: str = CHAT_TEMPLATE,
    special_tokens: Iterable[str] = (),
) -> Path:
    """Train a tokenizer on ``texts`` (plus some Python), make a tiny model, save both at ``path``.

    ``chat_template`` (default: a minimal ChatML) and extra ``special_tokens`` (a tool-calling
    template's ``<tool_call>`` markers) let a test use a real model family's template.
    Returns ``path``, which ``from_pretrained`` (and ``GRPOTrainer(model=str(path))``) accepts.
    """
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[*_SPECIAL_TOKENS, *special_tokens],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator([*texts, *_PYTHON_CORPUS], trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        chat_template=chat_template,
    )
    fast.save_pretrained(path)

    torch.manual_seed(seed)
    config = Qwen2Config(
        vocab_size=len(fast),
        hidden_size=hidden_size,
        intermediate_size=hidden_size * 2,
        num_hidden_layers=num_layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=2048,
        tie_word_embeddings=True,
        eos_token_id=fast.eos_token_id,
        pad_token_id=fast.pad_token_id,
        bos_token_id=None,
    )
    Qwen2ForCausalLM(config).save_pretrained(path)
    return path


def teach_tiny_model(
    path: str | Path,
    pairs: Iterable[tuple[str, str]],
    *,
    steps: int = 150,
    learning_rate: float = 1e-2,
    seed: int = 0,
) -> Path:
    """Train the tiny model at ``path`` to answer each prompt with its answer, and save it.

    A plain next-token loss on the answer tokens (the prompt is context only). A smoke run of
    a trainer that starts from this model sees some right answers, so its rewards are not all
    0: something for the trainer to learn from, and a check that a right answer is rewarded.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = Path(path)
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path)
    torch.manual_seed(seed)
    examples = []
    for prompt, answer in pairs:
        context = tokenizer(prompt).input_ids
        target = tokenizer(answer).input_ids + [tokenizer.eos_token_id]
        examples.append((torch.tensor([context + target]),
                         torch.tensor([[-100] * len(context) + target])))
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate)
    model.train()
    for _ in range(steps):
        loss = sum(model(input_ids=ids, labels=labels).loss for ids, labels in examples)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.save_pretrained(path)
    return path
