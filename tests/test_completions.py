"""Completion -> code: strings, conversations, fences and their edge cases."""

from __future__ import annotations

import pytest

from deepgym_ray.completions import answer_text, completion_to_code, extract_code

T = "`" * 3  # a backtick fence, spelled so this file's own source stays readable


def convo(*turns):
    return [{"role": role, "content": content} for role, content in turns]


CASES = [
    # 1. plain code, no fence: the whole text runs
    ("def f():\n    return 1\n", "def f():\n    return 1\n"),
    # 2. one python fence with prose around it
    (f"Here you go:\n{T}python\nx = 1\n{T}\nHope it helps.", "x = 1\n"),
    # 3. fence without a language tag
    (f"{T}\nx = 2\n{T}", "x = 2\n"),
    # 4. tilde fence
    ("~~~python\nx = 3\n~~~\n", "x = 3\n"),
    # 5. the last block wins
    (f"{T}python\nfirst = 1\n{T}\ntext\n{T}python\nsecond = 2\n{T}\n", "second = 2\n"),
    # 6. unterminated fence: runs to the end (a completion cut at the length limit)
    (f"Answer:\n{T}python\ndef f():\n    return 4", "def f():\n    return 4\n"),
    # 7. backticks inside a string in the code do not close the block
    (f'{T}python\ns = "{T}"\nt = 1\n{T}', f's = "{T}"\nt = 1\n'),
    # 8. a longer fence holds a shorter one inside
    (f"````markdown\n{T}python\ninner = 1\n{T}\n````", f"{T}python\ninner = 1\n{T}\n"),
    # 9. a tilde block is not closed by backticks
    (f"~~~\na = 1\n{T}\nb = 2\n~~~", f"a = 1\n{T}\nb = 2\n"),
    # 10. indented fence (inside a list item): its indentation is removed
    (f"1. code:\n   {T}python\n   def g():\n       return 5\n   {T}\n",
     "def g():\n    return 5\n"),
    # 11. empty string
    ("", ""),
    # 12. empty fenced block
    (f"{T}python\n{T}", ""),
    # 13. inline triple backticks on one line are not a fence
    (f"use {T}x = 1{T} please", f"use {T}x = 1{T} please"),
    # 14. Windows line endings
    (f"{T}python\r\nx = 6\r\n{T}\r\n", "x = 6\r\n"),
    # 15. a fence with extra info after the language
    (f"{T}python title=solution.py\nx = 7\n{T}", "x = 7\n"),
    # 16. a closing fence longer than the opening one still closes it
    (f"{T}\nx = 8\n`````\nafter", "x = 8\n"),
    # 17. prose only, no code: the whole text runs (and fails in the verifier)
    ("I cannot solve this.", "I cannot solve this."),
    # 18. the fence opens after prose on the same line, as models often write
    (f"Here it is: {T}python\ndef f():\n    return 9\n{T}\nDone.", "def f():\n    return 9\n"),
    # 19. the same without a language, after a colon
    (f"Here it is: {T}\nx = 10\n{T}", "x = 10\n"),
    # 20. prose with a fence inside it and a closing one later is no opening
    (f"use {T}x{T} then {T}python\ny = 1\n{T}", ""),
    # 21. several blocks on one line of prose: a fence closes and the next opens after text
    (f"x {T}python\nA = 1\n{T} y {T}python\nB = 2\n{T} z", "B = 2\n"),
    # 22. a closing fence followed by prose still closes the block
    (f"{T}python\nA = 1\n{T} and that is all", "A = 1\n"),
    # 23. a fence with a language inside a block (a docstring's example) does not close it
    (f'{T}python\ns = """\n{T}python\n"""\n{T}', f's = """\n{T}python\n"""\n'),
]


@pytest.mark.parametrize(("completion", "code"), CASES,
                         ids=[str(i) for i in range(1, len(CASES) + 1)])
def test_text_completions(completion, code):
    assert completion_to_code(completion) == code


CONVERSATIONS = [
    # 18. a plain conversation: the last assistant turn is the answer
    (convo(("system", "be brief"), ("user", "solve"), ("assistant", f"{T}\nx = 1\n{T}")),
     "x = 1\n"),
    # 19. TRL's conversational completion: just the assistant turn
    (convo(("assistant", f"{T}python\nx = 2\n{T}")), "x = 2\n"),
    # 20. several assistant turns: only the last one counts
    (convo(("assistant", f"{T}\nold = 1\n{T}"), ("user", "again"),
           ("assistant", f"{T}\nnew = 2\n{T}")), "new = 2\n"),
    # 21. tool-calling: an assistant turn with None content, a tool turn, then the answer
    ([{"role": "assistant", "content": None, "tool_calls": [{"function": {"name": "run"}}]},
      {"role": "tool", "content": "ok"},
      {"role": "assistant", "content": f"{T}\nfinal = 3\n{T}"}], "final = 3\n"),
    # 22. the last assistant turn is a bare tool call: empty code (a wrong answer, judged)
    ([{"role": "assistant", "content": f"{T}\ndraft = 1\n{T}"},
      {"role": "assistant", "content": None, "tool_calls": [{"function": {"name": "run"}}]}],
     ""),
    # 23. content as a list of parts; non-text parts are skipped
    ([{"role": "assistant", "content": [
        {"type": "text", "text": f"{T}python\nparts = "},
        {"type": "image", "url": "x.png"},
        {"type": "text", "text": f"4\n{T}"}]}], "parts = 4\n"),
    # 24. a single message dict
    ({"role": "assistant", "content": "y = 5"}, "y = 5"),
    # 25. empty content
    (convo(("assistant", "")), ""),
    # 26. a trailing user turn after the answer does not hide it
    (convo(("assistant", f"{T}\nz = 6\n{T}"), ("user", "thanks")), "z = 6\n"),
]


@pytest.mark.parametrize(("completion", "code"), CONVERSATIONS,
                         ids=[str(i) for i in range(18, 27)])
def test_conversations(completion, code):
    assert completion_to_code(completion) == code


def test_no_assistant_turn_names_the_index():
    with pytest.raises(ValueError, match=r"completion 7 has no assistant turn \(roles seen: "
                                         r"system, user\)"):
        completion_to_code(convo(("system", "s"), ("user", "u")), index=7)


def test_empty_conversation_has_no_assistant_turn():
    with pytest.raises(ValueError, match="completion 0 has no assistant turn"):
        completion_to_code([], index=0)


@pytest.mark.parametrize(
    ("completion", "message"),
    [
        (42, "a completion must be a string or a list of messages, got int"),
        (["just a string"], "each message must be a dict"),
        ([{"role": "assistant", "content": 3}], "message content must be a string"),
    ],
)
def test_wrong_types_are_named(completion, message):
    with pytest.raises(TypeError, match=f"completion 2: {message}"):
        completion_to_code(completion, index=2)


def test_answer_text_and_extract_code_compose():
    text = answer_text(convo(("assistant", f"{T}\nq = 1\n{T}")))
    assert text == f"{T}\nq = 1\n{T}"
    assert extract_code(text) == "q = 1\n"


# What OpenRLHF (and any loop decoding with skip_special_tokens=False) hands over: the answer
# with the chat template's end-of-turn text after it, right after the closing fence.
CODE = "def f():\n    return 1\n"
SPECIAL_ENDINGS = ["<|im_end|>", "\n<|im_end|>", "<|im_end|><|endoftext|>",
                   "<|im_end|>\n<|endoftext|><|endoftext|>", "<|eot_id|>", "<|end|>", "</s>",
                   "<｜end▁of▁sentence｜>", "<end_of_turn>\n<eos>", "  <|im_end|>  "]


@pytest.mark.parametrize("ending", SPECIAL_ENDINGS)
def test_special_tokens_after_the_closing_fence_are_not_code(ending):
    assert completion_to_code(f"Here:\n{T}python\n{CODE}{T}{ending}") == CODE


@pytest.mark.parametrize("ending", SPECIAL_ENDINGS)
def test_special_tokens_after_unfenced_code_are_not_code(ending):
    assert completion_to_code(CODE + ending).rstrip() == CODE.rstrip()


def test_special_tokens_before_the_answer_and_a_tokenizers_own_list():
    assert completion_to_code(f"<|endoftext|><|endoftext|>{T}\n{CODE}{T}") == CODE
    assert completion_to_code(f"{T}\n{CODE}{T}[EOT]", special_tokens=["[EOT]"]) == CODE
    assert completion_to_code(f"{T}\n{CODE}{T}[EOT]") == f"{CODE}{T}[EOT]\n"  # not a token


def test_special_token_text_inside_the_code_is_kept():
    code = 'end = "<|im_end|>"\nhtml = "</s>"\n'
    assert completion_to_code(f"{T}python\n{code}{T}<|im_end|>") == code
    assert completion_to_code(code) == code


def test_a_repository_task_takes_its_answer_from_its_own_language():
    from deepgym_ray.models import Environment
    from deepgym_ray.repo_tasks import PatchTask, TerminalTask

    text = ("The fix:\n```diff\n--- a/m.py\n+++ b/m.py\n```\nthen run\n```bash\npytest\n```\n"
            "and\n```python\nprint(1)\n```\n")
    patch = Environment(name="p", image="i", patch_task=PatchTask(
        instance_id="p", test_patch="t", FAIL_TO_PASS=["t::a"]))
    shell = Environment(name="s", image="i", terminal_task=TerminalTask(tests={"test.sh": b""}))
    plain = Environment(name="c", verifier_code="return 1.0")
    assert completion_to_code(text, languages=patch.answer_languages).startswith("--- a/m.py")
    assert completion_to_code(text, languages=shell.answer_languages) == "pytest\n"
    assert completion_to_code(text, languages=plain.answer_languages) == "print(1)\n"
    assert extract_code("no fences", languages=("diff",)) == "no fences"


def test_the_end_run_is_stripped_as_its_one_pattern_says():
    """What leaves the end of an answer is the run one regular expression describes (tokens,
    and the whitespace between and after them); its search took time quadratic in a long run
    that stops short of the end, so the code walks back token by token. The two agree on
    every mix of tokens, look-alikes and whitespace of up to four pieces."""
    import itertools
    import re

    from deepgym_ray.completions import SPECIAL_TOKEN_PATTERNS, strip_special_tokens

    one = "|".join(f"(?:{p})" for p in (*SPECIAL_TOKEN_PATTERNS, re.escape("[EOT]")))
    rule = re.compile(rf"(?:(?:{one})\s*)+\Z")
    pieces = ["<|im_end|>", "</s>", "[EOT]", " ", "\n", "\u00a0", "x", ">", "<|", "|>"]
    for n in range(5):
        for combo in itertools.product(pieces, repeat=n):
            text = "code" + "".join(combo)
            assert strip_special_tokens(text, ["[EOT]"]) == rule.sub("", text, count=1), text
