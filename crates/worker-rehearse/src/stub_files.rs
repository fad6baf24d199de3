//! What the exit stubs write (`adversarial`) and what `references` must tell apart from a
//! program the benchmark runs: the body that exits 0 on load, per language, and the files that
//! shadow a test runner's own modules. Imports no other module of the rehearsal, so the stub
//! runs and the reading of the benchmark's references share it without importing each other.

use std::path::Path;

/// Files that shadow a test runner's own modules when the source directory comes first on the
/// import path (`python3 -m unittest` from `/workspace`) or is read at start-up.
pub const SHADOW_FILES: [&str; 5] = [
    "unittest.py",
    "pytest.py",
    "conftest.py",
    "sitecustomize.py",
    "usercustomize.py",
];
/// Python's body: `os._exit` skips every handler a runner could notice with.
pub(crate) const PYTHON_EXIT: &str = "import os\nos._exit(0)\n";

/// The body that ends the process with status 0 as soon as a file of this language is loaded,
/// chosen by the file's extension. `os._exit` and `exit!` skip every handler a test runner
/// could use to notice; `process.exit` and `exit` are the strongest portable equivalents.
pub fn exit_stub(rel_path: &str) -> Option<&'static str> {
    let ext = Path::new(rel_path).extension()?.to_str()?;
    Some(match ext {
        "py" | "pyw" => PYTHON_EXIT,
        "sh" | "bash" => "exit 0\n",
        "js" | "mjs" | "cjs" | "jsx" | "ts" | "mts" | "cts" | "tsx" => "process.exit(0);\n",
        "rb" => "exit!(0)\n",
        _ => return None,
    })
}
