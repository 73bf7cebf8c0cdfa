//! Where a node keeps its data when it is not told: the XDG base directory rule, as a pure
//! function of the environment values (the caller reads the environment).

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

/// The subdirectory of the user's data directory that belongs to Ferry.
pub const APP_DIR: &str = "ferry";

/// Ferry's default data directory: `$XDG_DATA_HOME/ferry`, or `$HOME/.local/share/ferry` when
/// `XDG_DATA_HOME` is unset, empty or relative (the XDG Base Directory specification says such a
/// value is invalid and must be ignored). `None` when neither gives an absolute path.
///
/// Pass `std::env::var_os("XDG_DATA_HOME")` and `std::env::var_os("HOME")`;
/// [`DiskStore::open_default`](crate::DiskStore::open_default) does that and creates the directory.
pub fn default_data_dir(xdg_data_home: Option<&OsStr>, home: Option<&OsStr>) -> Option<PathBuf> {
    let absolute = |value: Option<&OsStr>| {
        value
            .map(Path::new)
            .filter(|path| path.is_absolute())
            .map(Path::to_path_buf)
    };
    if let Some(data_home) = absolute(xdg_data_home) {
        return Some(data_home.join(APP_DIR));
    }
    absolute(home).map(|home| home.join(".local").join("share").join(APP_DIR))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(xdg: Option<&str>, home: Option<&str>) -> Option<PathBuf> {
        default_data_dir(xdg.map(OsStr::new), home.map(OsStr::new))
    }

    #[test]
    fn xdg_data_home_wins_when_absolute() {
        assert_eq!(
            dir(Some("/data"), Some("/home/u")),
            Some(PathBuf::from("/data/ferry"))
        );
    }

    #[test]
    fn falls_back_to_home_when_xdg_is_unset_empty_or_relative() {
        let expected = Some(PathBuf::from("/home/u/.local/share/ferry"));
        assert_eq!(dir(None, Some("/home/u")), expected);
        assert_eq!(dir(Some(""), Some("/home/u")), expected);
        assert_eq!(dir(Some("rel/data"), Some("/home/u")), expected);
    }

    #[test]
    fn none_without_an_absolute_home() {
        assert_eq!(dir(None, None), None);
        assert_eq!(dir(Some(""), Some("")), None);
        assert_eq!(dir(None, Some("relative")), None);
    }
}
