//! Paths as the file system will see them: every path a tool call names is
//! resolved before the gate decides on it, so no spelling (`..`, `.`,
//! repeated `/`, a symlink on the way, a relative path, `~`) makes a place
//! look like another.
//!
//! [`resolve`] walks the path one component at a time, following each
//! symlink that exists (a dangling one to where it points: a write would
//! create its target), and reads the rest, once a component does not exist
//! yet, lexically: nothing that does not exist can redirect it. A path it
//! cannot walk (a loop, a directory it may not read) has no resolution, and
//! the gate treats it as outside everything.

use std::path::{Component, Path, PathBuf};

/// Symlinks followed in one resolution before it is called a loop (Linux's
/// own limit).
const MAX_LINKS: usize = 40;

/// `raw` made absolute against `base` and resolved; `None` when it cannot
/// be (a symlink loop, a component that cannot be read).
pub(crate) fn resolve(raw: &Path, base: &Path) -> Option<PathBuf> {
    let mut pending: Vec<PathBuf> = Vec::new();
    push_components(&mut pending, &base.join(raw));
    let mut current = PathBuf::from("/");
    let mut lexical = false;
    let mut links = 0;
    while let Some(part) = pending.pop() {
        if part == Path::new("..") {
            current.pop();
            continue;
        }
        let next = current.join(&part);
        if lexical {
            current = next;
            continue;
        }
        match std::fs::symlink_metadata(&next) {
            Ok(meta) if meta.file_type().is_symlink() => {
                links += 1;
                if links > MAX_LINKS {
                    return None;
                }
                let target = std::fs::read_link(&next).ok()?;
                if target.is_absolute() {
                    current = PathBuf::from("/");
                }
                push_components(&mut pending, &target);
            }
            Ok(_) => current = next,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                lexical = true;
                current = next;
            }
            Err(_) => return None,
        }
    }
    Some(current)
}

/// Push `path`'s components (no root, no `.`) onto a stack, last first, so
/// they pop in order ahead of what is already there.
fn push_components(stack: &mut Vec<PathBuf>, path: &Path) {
    let parts: Vec<PathBuf> = path
        .components()
        .filter_map(|c| match c {
            Component::Normal(name) => Some(PathBuf::from(name)),
            Component::ParentDir => Some(PathBuf::from("..")),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => None,
        })
        .collect();
    stack.extend(parts.into_iter().rev());
}

/// A directory as the gate compares against: resolved when it can be, else
/// as given (it is then compared as text, which can only make it match
/// less).
pub(crate) fn resolved_dir(dir: &Path) -> PathBuf {
    resolve(dir, Path::new("/")).unwrap_or_else(|| dir.to_path_buf())
}

/// Whether the resolved `path` is `dir` or inside it. Case-insensitive on
/// macOS, whose file systems usually are: `/TMP/X` is `/tmp/x` there.
pub(crate) fn within(path: &Path, dir: &Path) -> bool {
    #[cfg(target_vendor = "apple")]
    {
        let lower = |p: &Path| PathBuf::from(p.to_string_lossy().to_lowercase());
        lower(path).starts_with(lower(dir))
    }
    #[cfg(not(target_vendor = "apple"))]
    {
        path.starts_with(dir)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn spellings_resolve_to_one_place() {
        let tmp = tempfile::tempdir().expect("tmp");
        let root = resolved_dir(tmp.path());
        let ws = root.join("ws");
        std::fs::create_dir_all(ws.join("docs")).expect("mkdir");
        std::fs::create_dir(root.join("outside")).expect("mkdir");
        symlink(root.join("outside"), ws.join("docs/link")).expect("link");
        symlink("../../outside/new", ws.join("docs/dangling")).expect("link");
        symlink("loop", ws.join("loop")).expect("link");
        let r = |raw: &str| resolve(Path::new(raw), &ws);
        assert_eq!(r("docs/a.md"), Some(ws.join("docs/a.md")));
        assert_eq!(r("./docs//a.md"), Some(ws.join("docs/a.md")));
        assert_eq!(r("docs/../../outside/x"), Some(root.join("outside/x")));
        assert_eq!(r("docs/link/evil"), Some(root.join("outside/evil")));
        assert_eq!(
            r("docs/link/../x"),
            Some(root.join("x")),
            "`..` after the link"
        );
        assert_eq!(r("docs/dangling"), Some(root.join("outside/new")));
        assert_eq!(r("new/dir/../x"), Some(ws.join("new/x")));
        assert_eq!(r("loop"), None);
        let abs = ws.join("docs").join("..").join("docs").join("a.md");
        assert_eq!(r(&abs.to_string_lossy()), Some(ws.join("docs/a.md")));
        assert!(within(&ws.join("docs/a.md"), &ws));
        assert!(within(&ws, &ws));
        assert!(!within(&root.join("wsx"), &ws), "components, not text");
    }
}
