//! The node's Ed25519 identity: created on first start, the secret kept in a 0600 file.
//!
//! The file is two lines of text:
//!
//! ```text
//! ferry-identity v1
//! 9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60
//! ```
//!
//! the format name and version, then the 32-byte Ed25519 secret key (the RFC 8032 seed) as 64 hex
//! digits, each line ended by a newline. Reading accepts either case of hex digits and a missing
//! final newline, nothing else: no blank lines, no spaces, no comments. The public key is not
//! stored: it follows from the secret.
//!
//! The file must be readable and writable by its owner only (mode 0600 or stricter): one that
//! group or others may access is refused, not repaired, since its secret may already be known.
//! A new file is written to a temporary file created with mode 0600, synced, renamed into place,
//! and its directory synced, so a crash leaves either no identity or a whole one. Two processes
//! creating the same file at the same instant would each rename their own into place and one of
//! them would run with a key that is not on disk: start one daemon per data directory.
//!
//! Where practical, copies of the secret this module holds (the bytes read, the text written)
//! are zeroed when dropped.

use std::fmt::Write as _;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read as _, Write as _};
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _, PermissionsExt as _};
use std::path::Path;

use seal::{Identity, Zeroizing};

use crate::error::{IoContext as _, StartError};

/// The first line of an identity file.
pub const HEADER: &str = "ferry-identity v1";

/// Longer than any identity file: what is read before giving up.
const MAX_FILE_LEN: u64 = 1024;

/// Loads the identity kept in `path`, or makes a new one there if there is no file. Returns the
/// identity and whether it was created just now.
///
/// Fails, saying what to do, if the file may be read by group or others, is not an identity file,
/// or cannot be read or written.
pub fn load_or_create(path: &Path) -> Result<(Identity, bool), StartError> {
    match File::open(path) {
        Ok(file) => load(path, file).map(|identity| (identity, false)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            create(path).map(|identity| (identity, true))
        }
        Err(e) => Err(e).doing(|| format!("opening the identity file {}", path.display())),
    }
}

fn load(path: &Path, mut file: File) -> Result<Identity, StartError> {
    let shown = path.display();
    // The opened file's own metadata: no window between the check and the read.
    let meta = file
        .metadata()
        .doing(|| format!("reading the identity file {shown}"))?;
    if !meta.is_file() {
        return Err(StartError::File(format!(
            "the identity file {shown} is not a regular file"
        )));
    }
    let mode = meta.permissions().mode() & 0o7777;
    if mode & 0o077 != 0 {
        return Err(StartError::File(format!(
            "the identity file {shown} holds this node's secret key but group or others may \
             access it (mode {mode:04o}); make it private with `chmod 600 {shown}` (or, if \
             others may have read it, delete it and a new identity is made at the next start)"
        )));
    }
    // Room for the whole file from the start, so the buffer never moves (leaving a copy behind).
    let mut text = Zeroizing::new(Vec::with_capacity(MAX_FILE_LEN as usize + 1));
    (&mut file)
        .take(MAX_FILE_LEN + 1)
        .read_to_end(&mut text)
        .doing(|| format!("reading the identity file {shown}"))?;
    match parse(&text) {
        Ok(secret) => Ok(Identity::from_secret(*secret)),
        Err(Malformed::Version(version)) => Err(StartError::File(format!(
            "the identity file {shown} is `{version}`, a format this version of Ferry does not \
             read (it reads `{HEADER}`)"
        ))),
        Err(Malformed::Content) => Err(StartError::File(format!(
            "the identity file {shown} is not a Ferry identity file: expected the line \
             `{HEADER}` and then the secret key as 64 hex digits"
        ))),
    }
}

enum Malformed {
    /// A first line `ferry-identity <something else>`.
    Version(String),
    /// Anything else.
    Content,
}

fn parse(text: &[u8]) -> Result<Zeroizing<[u8; 32]>, Malformed> {
    let text = text.strip_suffix(b"\n").unwrap_or(text);
    let (first, secret) = text
        .iter()
        .position(|&b| b == b'\n')
        .map(|i| (&text[..i], &text[i + 1..]))
        .unwrap_or((text, &[]));
    if first != HEADER.as_bytes() {
        // `ferry-identity v<number>`: a version this build does not know.
        return Err(match first.strip_prefix(b"ferry-identity v") {
            Some(n) if (1..=9).contains(&n.len()) && n.iter().all(u8::is_ascii_digit) => {
                Malformed::Version(String::from_utf8_lossy(first).into_owned())
            }
            _ => Malformed::Content,
        });
    }
    if secret.len() != 64 {
        return Err(Malformed::Content);
    }
    let mut bytes = Zeroizing::new([0u8; 32]);
    for (byte, pair) in bytes.iter_mut().zip(secret.chunks_exact(2)) {
        let hi = hex_digit(pair[0]).ok_or(Malformed::Content)?;
        let lo = hex_digit(pair[1]).ok_or(Malformed::Content)?;
        *byte = hi << 4 | lo;
    }
    Ok(bytes)
}

fn hex_digit(c: u8) -> Option<u8> {
    // `to_digit(16)` reads 0-9, a-f and A-F only, so the value fits a nibble.
    char::from(c).to_digit(16).map(|d| d as u8)
}

fn create(path: &Path) -> Result<Identity, StartError> {
    let shown = path.display();
    let Some(name) = path.file_name() else {
        return Err(StartError::File(format!(
            "the identity file {shown} does not name a file"
        )));
    };
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .doing(|| format!("creating the directory {}", dir.display()))?;

    let mut secret = Zeroizing::new([0u8; 32]);
    getrandom::getrandom(&mut secret[..]).map_err(|error| StartError::Random {
        what: "a secret key",
        error,
    })?;
    let mut text = Zeroizing::new(String::with_capacity(HEADER.len() + 66));
    text.push_str(HEADER);
    text.push('\n');
    for b in secret.iter() {
        let _ = write!(text, "{b:02x}");
    }
    text.push('\n');

    let tmp = dir.join(format!(
        ".{}.tmp-{}",
        name.to_string_lossy(),
        std::process::id()
    ));
    // A leftover from a crashed process that had our process id.
    let _ = fs::remove_file(&tmp);
    let written = (|| -> io::Result<()> {
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        // The mode above is filtered by the umask; make it exactly 0600 whatever the umask.
        file.set_permissions(fs::Permissions::from_mode(0o600))?;
        file.write_all(text.as_bytes())?;
        file.sync_all()?;
        fs::rename(&tmp, path)?;
        File::open(dir)?.sync_all()
    })();
    if let Err(e) = written {
        let _ = fs::remove_file(&tmp);
        return Err(e).doing(|| format!("writing a new identity file {shown}"));
    }
    Ok(Identity::from_secret(*secret))
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;

    /// A fresh directory under the system's temporary directory, removed on drop.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new(tag: &str) -> Self {
            static N: AtomicU32 = AtomicU32::new(0);
            let dir = std::env::temp_dir().join(format!(
                "ferry-identity-{tag}-{}-{}",
                std::process::id(),
                N.fetch_add(1, Ordering::Relaxed)
            ));
            let _ = fs::remove_dir_all(&dir);
            fs::create_dir_all(&dir).expect("create a temporary directory");
            Self(dir)
        }

        fn path(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    fn mode(path: &Path) -> u32 {
        fs::metadata(path).unwrap().permissions().mode() & 0o7777
    }

    fn write_with_mode(path: &Path, contents: &[u8], mode: u32) {
        fs::write(path, contents).unwrap();
        fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
    }

    fn error(path: &Path) -> String {
        format!("{:#}", load_or_create(path).expect_err("refused"))
    }

    #[test]
    fn creates_a_private_file_and_reloads_the_same_key() {
        let tmp = TempDir::new("create");
        let path = tmp.path().join("deeper/still/identity");
        let (created, was_created) = load_or_create(&path).unwrap();
        assert!(was_created);
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(&tmp.path().join("deeper/still")), 0o700);
        let text = fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.split_terminator('\n').collect();
        assert_eq!(lines.len(), 2, "{text:?}");
        assert_eq!(lines[0], HEADER);
        assert_eq!(lines[1].len(), 64);
        assert!(text.ends_with('\n'));
        // No temporary file left behind.
        assert_eq!(
            fs::read_dir(tmp.path().join("deeper/still"))
                .unwrap()
                .count(),
            1
        );

        let (loaded, was_created) = load_or_create(&path).unwrap();
        assert!(!was_created);
        assert_eq!(loaded.public(), created.public());
        assert_eq!(*loaded.secret_bytes(), *created.secret_bytes());

        // Another file, another key.
        let (other, _) = load_or_create(&tmp.path().join("other")).unwrap();
        assert_ne!(other.public(), created.public());
    }

    #[test]
    fn reads_a_hand_written_file() {
        let tmp = TempDir::new("rfc");
        let path = tmp.path().join("identity");
        // RFC 8032 §7.1 TEST 1, upper case, no final newline.
        write_with_mode(
            &path,
            b"ferry-identity v1\n9D61B19DEFFD5A60BA844AF492EC2CC44449C5697B326919703BAC031CAE7F60",
            0o400,
        );
        let (identity, created) = load_or_create(&path).unwrap();
        assert!(!created);
        assert_eq!(
            identity.public().to_string(),
            "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a"
        );
    }

    #[test]
    fn refuses_a_file_others_may_read() {
        let tmp = TempDir::new("mode");
        let path = tmp.path().join("identity");
        load_or_create(&path).unwrap();
        for bad in [0o644, 0o640, 0o604, 0o660, 0o602, 0o610] {
            fs::set_permissions(&path, fs::Permissions::from_mode(bad)).unwrap();
            let message = error(&path);
            assert!(message.contains("chmod 600"), "{message}");
            assert!(message.contains(&path.display().to_string()), "{message}");
            assert!(message.contains(&format!("{bad:04o}")), "{message}");
        }
        // Following the advice works.
        fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();
        assert!(!load_or_create(&path).unwrap().1);
    }

    #[test]
    fn refuses_malformed_files() {
        let tmp = TempDir::new("garbage");
        let path = tmp.path().join("identity");
        let secret = "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60";
        let bad: Vec<Vec<u8>> = vec![
            b"".to_vec(),
            b"hello\n".to_vec(),
            format!("{HEADER}\n").into_bytes(),
            format!("{HEADER}\n{}\n", &secret[..62]).into_bytes(),
            format!("{HEADER}\n{secret}00\n").into_bytes(),
            format!("{HEADER}\n{}g\n", &secret[..63]).into_bytes(),
            format!("{HEADER}\n {}\n", &secret[1..]).into_bytes(),
            format!("{HEADER}\n{secret}\n\n").into_bytes(),
            format!("{HEADER}\n{secret}\nmore\n").into_bytes(),
            format!("{HEADER} \n{secret}\n").into_bytes(),
            format!("\n{HEADER}\n{secret}\n").into_bytes(),
            format!("{HEADER}\r\n{secret}\r\n").into_bytes(),
            format!("{secret}\n").into_bytes(),
            [b"\xff\xfe".as_slice(), secret.as_bytes()].concat(),
            vec![b'a'; 10_000],
        ];
        for contents in bad {
            write_with_mode(&path, &contents, 0o600);
            let message = error(&path);
            assert!(
                message.contains("not a Ferry identity file"),
                "{:?}: {message}",
                String::from_utf8_lossy(&contents)
            );
            // The refused file is left alone.
            assert_eq!(fs::read(&path).unwrap(), contents);
        }
        write_with_mode(
            &path,
            format!("ferry-identity v2\n{secret}\n").as_bytes(),
            0o600,
        );
        let message = error(&path);
        assert!(
            message.contains("`ferry-identity v2`, a format this version of Ferry does not read"),
            "{message}"
        );
    }

    #[test]
    fn refuses_a_directory() {
        let tmp = TempDir::new("dir");
        let path = tmp.path().join("identity");
        fs::create_dir(&path).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o700)).unwrap();
        let message = error(&path);
        assert!(message.contains("not a regular file"), "{message}");
    }
}
