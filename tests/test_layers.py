"""The packages of mt/ are its layers: every module imports only from its own package or the packages below, with
no cycle anywhere, and only the command line imports mt modules lazily. The README's "Layout" block and
docs/design.md's draw the same order, one line a package. No test file imports another: what tests share lives in a
conftest.py or a helper module."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "mt"
TESTS = PACKAGE.parent / "tests"
README = PACKAGE.parent / "README.md"
DESIGN = PACKAGE.parent / "docs" / "design.md"

# Bottom to top. "base" is the flat modules of mt/ itself, "cli" the command line above every package.
PACKAGES = ["base", "model", "documents", "data", "decoding", "training", "serving", "interop", "commands", "cli"]
COMMAND_LINE = {"__main__"}  # `python -m mt`: a flat module of mt/ that is the command line's


def _modules() -> dict[str, Path]:
    """{"config": mt/config.py, "model.transformer": mt/model/transformer.py, "model.__init__": ...}"""
    return {".".join(path.relative_to(PACKAGE).with_suffix("").parts): path for path in PACKAGE.rglob("*.py")}


def package_of(module: str) -> str:
    if "." in module:
        return module.split(".")[0]
    return "cli" if module in COMMAND_LINE else "base"


def _resolve(dotted: str, modules) -> str:
    """The module that `from mt.<dotted> import ...` or `import mt.<dotted>` reads: a package means its __init__."""
    return dotted if dotted in modules else f"{dotted}.__init__"


def _imports(tree: ast.Module, modules) -> list[tuple[str, bool]]:
    """(mt module imported, whether the import sits inside a function) for every import in the module;
    `from mt.model import kernels` imports mt/model/kernels.py."""
    found = []

    def visit(node, in_function: bool):
        for child in ast.iter_child_nodes(node):
            inside = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.ImportFrom) and child.module and child.level == 0 and (
                    child.module == "mt" or child.module.startswith("mt.")):
                base = child.module[3:]
                for alias in child.names:
                    name = f"{base}.{alias.name}" if base else alias.name
                    found.append((name if name in modules else _resolve(base, modules), inside))
            elif isinstance(child, ast.Import):
                found.extend((_resolve(alias.name[3:], modules), inside) for alias in child.names
                             if alias.name.startswith("mt."))
            visit(child, inside)

    visit(tree, False)
    return found


def _graph() -> dict[str, list[tuple[str, bool]]]:
    modules = _modules()
    return {module: _imports(ast.parse(path.read_text(encoding="utf-8")), modules) for module, path in modules.items()}


def test_every_folder_of_mt_is_a_listed_package_and_every_package_a_folder():
    folders = {path.parent.name for path in PACKAGE.glob("*/__init__.py")}
    assert folders == set(PACKAGES) - {"base"}


def test_no_module_imports_from_a_package_above_its_own():
    level = {package: i for i, package in enumerate(PACKAGES)}
    upward = [f"{module} ({package_of(module)}) imports {target} ({package_of(target)})"
              for module, imports in _graph().items() for target, _ in imports
              if level[package_of(target)] > level[package_of(module)]]
    assert upward == []


def test_only_the_command_line_imports_mt_modules_inside_functions():
    """The commands load what they need (and optional extras) when they run; so does mt clean's -o expander."""
    lazy = [f"{module} imports {target} inside a function" for module, imports in _graph().items()
            if package_of(module) != "cli" for target, inside in imports if inside]
    assert lazy == []


def _cycles(graph: dict[str, set[str]]) -> list[str]:
    state: dict[str, str] = {}
    cycles = []

    def visit(module: str, path: list[str]) -> None:
        state[module] = "open"
        for target in sorted(graph.get(module, ())):
            if state.get(target) == "open":
                cycles.append(" -> ".join(path[path.index(target):] + [target]))
            elif target not in state:
                visit(target, path + [target])
        state[module] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    return cycles


def test_the_imports_have_no_cycle_inside_or_between_packages():
    graph = {module: {target for target, _ in imports if target != module} for module, imports in _graph().items()}
    assert _cycles(graph) == []


def test_the_cycle_check_sees_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a -> b -> c -> a"]


def test_the_walk_sees_imports_inside_functions_and_modules_named_from_a_package():
    """The tests above must not be blind: an import hidden in a function is found, and so is a module named in
    `from mt.<package> import <module>`."""
    modules = _modules()
    tree = ast.parse("import torch\nfrom mt.config import Config\nfrom mt.model import kernels\n"
                     "def f():\n    from mt.model.transformer import build_model\n")
    assert _imports(tree, modules) == [("config", False), ("model.kernels", False), ("model.transformer", True)]


def _layout(path: Path) -> list[str]:
    """The first word of each unindented line of the file's "Layout" code block, top to bottom (an indented line
    goes on with the one above)."""
    text = path.read_text(encoding="utf-8")
    section = text[text.index("## Layout"):]
    block = section[section.index("```") + 3:]
    block = block[:block.index("```")]
    return [line.split()[0] for line in block.splitlines() if line.strip() and not line[0].isspace()]


def _layout_packages(path: Path) -> list[str]:
    """The packages a Layout block draws, top to bottom: `cli/` is the top, a `name/` line a package, and the line
    that starts with a flat module the base, which must list every flat module."""
    order = []
    for word in _layout(path):
        package = word[:-1] if word.endswith("/") else package_of(word[:-3]) if word.endswith(".py") else None
        if package is not None and order[-1:] != [package]:  # the base may take two lines
            order.append(package)
    return order


def test_the_readme_and_design_layouts_draw_the_packages_in_order():
    for path in (README, DESIGN):
        assert _layout_packages(path) == list(reversed(PACKAGES)), path.name


def test_the_readme_layout_names_every_flat_module():
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## Layout"):]
    block = section[section.index("```") + 3:]
    block = block[:block.index("```")]
    named = {word[:-3] for word in block.split() if word.endswith(".py")}
    assert named == {module for module in _modules() if "." not in module} - {"__init__"}


def test_documents_is_a_leaf_over_the_base():
    """The document formats read and write files and nothing else: they import their own package and the base
    only, so that every caller (mt translate, mt serve) hands them translations, never the other way round."""
    graph = _graph()
    above = {(module, imported) for module, imports in graph.items() if package_of(module) == "documents"
             for imported, _ in imports if package_of(imported) not in ("documents", "base")}
    assert not above, sorted(above)


def _test_files_imported(tree: ast.Module, path: Path) -> list[str]:
    """The test_*.py files of tests/ that the file at path imports, however it names them: `from
    tests.documents.test_localization import x`, `from tests.documents import test_localization`, `import
    tests.test_config`, `from .test_localization import x`."""
    package = path.relative_to(TESTS.parent).parent.parts  # ("tests", "documents")
    named = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            named.extend(alias.name.split(".") for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = [*package[:len(package) + 1 - node.level]] if node.level else []
            base += node.module.split(".") if node.module else []
            named.extend([base, *([*base, alias.name] for alias in node.names)])
    files = {TESTS.parent.joinpath(*parts).with_suffix(".py") for parts in named if parts}
    return sorted(str(file.relative_to(TESTS.parent)) for file in files
                  if file.name.startswith("test_") and file.is_file())


def test_no_test_file_imports_another():
    imported = {str(path.relative_to(TESTS.parent)): _test_files_imported(ast.parse(path.read_text(encoding="utf-8")),
                                                                            path)
                for path in sorted(TESTS.rglob("test_*.py"))}
    assert {path: files for path, files in imported.items() if files} == {}


def test_the_test_import_check_sees_each_way_of_naming_a_test_file():
    path = TESTS / "documents" / "test_formats.py"
    tree = ast.parse("from tests.documents.test_localization import x\nfrom tests import test_config\n"
                     "import tests.test_docs\nfrom .test_pdf import y\nfrom tests.conftest import run_mt\n"
                     "from tests.documents.localization_checks import toolkit_store\n")
    assert _test_files_imported(tree, path) == ["tests/documents/test_localization.py", "tests/documents/test_pdf.py",
                                                "tests/test_config.py", "tests/test_docs.py"]
