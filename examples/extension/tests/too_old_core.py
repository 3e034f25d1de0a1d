"""Run by ci/check_abi_compat.py only (not collected: no test_ prefix), against a core built
offering ABI 1.0: the extension (targeting 1.1) must refuse to import, naming both versions."""

import pytest


def test_import_fails_naming_both_versions():
    from ember import _C

    assert tuple(_C.abi_version()) == (1, 0)
    with pytest.raises(ImportError) as e:
        import ember_example_ext  # noqa: F401
    assert str(e.value) == ("this extension targets ember stable ABI 1.1 but the installed "
                            "ember-core offers ABI 1.0: upgrade ember-core")
