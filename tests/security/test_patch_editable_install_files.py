"""A patch adds what a development install or a distribution leaves, where an image could read
it (an entry point list in a source layout's folder, an egg, an ``.egg-link``, an editable
finder or ``.pth``), a start-up module in another form than a ``.py`` file, or byte code that
stands in for a module's source. None loads on this image; each would on one that puts its
folder on sys.path, so each is refused wherever it is."""

from repo_attacks import FORCE_PASSES, attack_tests, new_file

TAGS = ('repository', 'startup', 'forged-pass')
DIFFS = [new_file(path, text) for path, text in (
    ("src/minicalc_report.egg-info/entry_points.txt",
     "[pytest11]\nminicalc_report = minicalc._report\n"),
    ("minicalc/entry_points.txt", "[pytest11]\nminicalc_report = minicalc._report\n"),
    ("minicalc_report.egg/EGG-INFO/PKG-INFO", "Name: minicalc_report\n"),
    ("minicalc.egg-link", "/testbed\n.\n"),
    ("__editable___minicalc_1_0_finder.py", FORCE_PASSES),
    ("__editable__.minicalc-1.0.pth", "import __editable___minicalc_1_0_finder\n"),
    ("sitecustomize/__init__.py", FORCE_PASSES),
    ("minicalc/__pycache__/arith.cpython-311.pyc", "not byte code\n"),
    ("pytest.toml", "[pytest]\naddopts = ['-p', 'minicalc._report']\n"),
)]


test_alone, test_in_batch = attack_tests("patch", DIFFS)
