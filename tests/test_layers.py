"""The layers of mt/: every module imports only from its own layer or below, with no cycle, and only the
command line imports mt modules lazily. The README's "Layout" block shows the same table, line by line."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "mt"
README = PACKAGE.parent / "README.md"

# Bottom to top. A module may import modules of its own layer (no cycle) or of the layers below.
LAYERS = [
    ["errors", "symbols", "files", "folder_lock"],
    ["config", "checkpoint"],
    ["tokenizer", "tokenizer_json", "masks", "runtime", "tuning", "flops", "metrics", "run_log", "segments",
     "api_keys", "language_id", "progress", "http_limits", "request_fields", "glossary", "html_markup", "detection"],
    ["data", "corpus", "batching", "mixing", "prepare", "clean", "clean_filters", "word_alignment"],
    ["model", "kernels", "cache", "quantize", "ema", "ensemble"],
    ["recipe", "update"],
    ["decoding"],
    ["alignment", "sampler", "search", "constraints", "scheduler", "backend", "ct2_backend"],
    ["lines", "loading", "scoring", "long_sentences"],
    ["evaluation", "decode_thread", "serve_metrics"],
    ["train", "translate", "export", "hf_export", "marian", "bench", "info", "plot", "plot_data", "served_models",
     "distill", "distilled"],
    ["server"],
    ["cli", "__main__", "__init__"],
]
LAZY_IMPORTS_ALLOWED = {"cli"}  # the commands load what they need (and optional extras) when they run


def _imports(tree: ast.Module) -> list[tuple[str, bool]]:
    """(mt module imported, whether the import sits inside a function) for every import in the module."""
    found = []

    def visit(node, in_function: bool):
        for child in ast.iter_child_nodes(node):
            inside = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.ImportFrom) and child.module and child.level == 0:
                if child.module == "mt":
                    found.extend((alias.name, inside) for alias in child.names)
                elif child.module.startswith("mt."):
                    found.append((child.module.split(".")[1], inside))
            elif isinstance(child, ast.Import):
                found.extend((alias.name.split(".")[1], inside) for alias in child.names
                             if alias.name.startswith("mt."))
            visit(child, inside)

    visit(tree, False)
    return found


def _graph() -> dict[str, list[tuple[str, bool]]]:
    return {path.stem: _imports(ast.parse(path.read_text(encoding="utf-8"))) for path in PACKAGE.glob("*.py")}


def _layer_of() -> dict[str, int]:
    return {module: i for i, layer in enumerate(LAYERS) for module in layer}


def test_the_layer_table_names_every_module_once():
    listed = [module for layer in LAYERS for module in layer]
    assert len(listed) == len(set(listed))
    assert set(listed) == {path.stem for path in PACKAGE.glob("*.py")}


def _readme_layout() -> list[list[str]]:
    """The modules the README's Layout block names, a list per line that names any, top to bottom."""
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## Layout"):]
    block = section[section.index("```") + 3:]
    block = block[:block.index("```")]
    return [[word[:-3] for word in line.split() if word.endswith(".py")] for line in block.splitlines()
            if any(word.endswith(".py") for word in line.split())]


def test_the_readme_layout_lists_exactly_the_layers_of_the_table():
    """Top to bottom, each README line that names modules names one layer of LAYERS, each module once."""
    layout = _readme_layout()
    assert [sorted(line) for line in layout] == [sorted(layer) for layer in reversed(LAYERS)]


def test_no_module_imports_from_a_layer_above_its_own():
    layer = _layer_of()
    upward = [f"{module} ({layer[module]}) imports {target} ({layer[target]})"
              for module, imports in _graph().items() for target, _ in imports if layer[target] > layer[module]]
    assert upward == []


def test_only_the_command_line_imports_mt_modules_inside_functions():
    lazy = [f"{module} imports {target} inside a function" for module, imports in _graph().items()
            if module not in LAZY_IMPORTS_ALLOWED for target, inside in imports if inside]
    assert lazy == []


def test_the_imports_have_no_cycle():
    graph = {module: {target for target, _ in imports if target != module} for module, imports in _graph().items()}
    state: dict[str, str] = {}
    cycles = []

    def visit(module: str, path: list[str]) -> None:
        state[module] = "open"
        for target in sorted(graph[module]):
            if state.get(target) == "open":
                cycles.append(" -> ".join(path[path.index(target):] + [target]))
            elif target not in state:
                visit(target, path + [target])
        state[module] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    assert cycles == []


def test_the_walk_sees_imports_inside_functions():
    """The tests above must not be blind: an import hidden in a function is found."""
    tree = ast.parse("import torch\nfrom mt.config import Config\ndef f():\n    from mt.model import build_model\n")
    assert _imports(tree) == [("config", False), ("model", True)]
