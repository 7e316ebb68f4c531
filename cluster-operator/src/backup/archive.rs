//! A backup archive on its way from the source server to the target: a local file the
//! download streams into and the upload streams from, and what the archive holds (read from
//! the zip's central directory, a few bytes at the end of the file: the archive is never
//! read whole).
//!
//! The file lives in the operator's archive directory ([`super::Settings::archive_dir`], the
//! system temporary directory by default: in a pod an `emptyDir` sized for the largest
//! archive), is named `infinispan-restore-<restore job>.zip`, and is deleted when the
//! [`ArchiveFile`] is dropped; files left by a killed operator are deleted at start
//! ([`remove_leftovers`]).
//!
//! Layout of a 16.0.7 archive (`manifest.properties` at the root, then per container):
//! `containers/<container>/caches/<name>/<name>.xml|.dat`, `templates/<name>.xml`,
//! `proto-schemas/<name>` (names end in `.proto`), `tasks/<name>`, `counters/counters.dat`
//! (every counter in one file).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use tokio::io::{AsyncReadExt, AsyncSeekExt};

/// File-name prefix of archive files.
pub const FILE_PREFIX: &str = "infinispan-restore-";

/// What an archive holds, by kind (server names).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ArchiveContents {
    pub caches: BTreeSet<String>,
    pub templates: BTreeSet<String>,
    pub schemas: BTreeSet<String>,
    pub tasks: BTreeSet<String>,
    /// Counters are stored together; their names are not visible from the zip's listing.
    pub has_counters: bool,
}

impl ArchiveContents {
    /// Classifies the entry names of an archive's zip.
    pub fn from_entries<'a>(entries: impl IntoIterator<Item = &'a str>) -> Self {
        let mut contents = ArchiveContents::default();
        for entry in entries {
            let mut parts = entry.splitn(4, '/');
            let (Some("containers"), Some(_container), Some(kind), Some(rest)) =
                (parts.next(), parts.next(), parts.next(), parts.next())
            else {
                continue;
            };
            if rest.is_empty() || rest.ends_with('/') {
                continue; // a directory entry
            }
            match kind {
                "caches" => {
                    if let Some(name) = cache_of(rest) {
                        contents.caches.insert(name.to_string());
                    }
                }
                "templates" => {
                    if let Some(name) = rest.strip_suffix(".xml") {
                        contents.templates.insert(name.to_string());
                    }
                }
                "proto-schemas" => {
                    contents.schemas.insert(rest.to_string());
                }
                "tasks" => {
                    contents.tasks.insert(rest.to_string());
                }
                "counters" => contents.has_counters = true,
                _ => {}
            }
        }
        contents
    }
}

/// The cache of `<name>/<name>.xml` or `<name>/<name>.dat` (the name may itself hold `/`).
fn cache_of(rest: &str) -> Option<&str> {
    let stem = rest
        .strip_suffix(".xml")
        .or_else(|| rest.strip_suffix(".dat"))?;
    // stem is "<name>/<name>": an odd length, split in the middle
    if stem.len() % 2 == 0 {
        return None;
    }
    let half = stem.len() / 2;
    let (first, second) = (stem.get(..half)?, stem.get(half + 1..)?);
    (stem.as_bytes()[half] == b'/' && first == second).then_some(first)
}

/// The archive is not a zip this code can read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ZipError {
    #[error("not a zip archive: no end-of-central-directory record")]
    NoDirectory,
    #[error("a damaged zip archive: {0}")]
    Damaged(&'static str),
    #[error("a zip archive spanning several disks")]
    MultiDisk,
    #[error("a zip central directory of {0} bytes, more than this operator reads")]
    TooLarge(u64),
}

const EOCD_SIGNATURE: u32 = 0x0605_4b50;
const EOCD_LEN: usize = 22;
const ZIP64_LOCATOR_SIGNATURE: u32 = 0x0706_4b50;
const ZIP64_LOCATOR_LEN: usize = 20;
const ZIP64_EOCD_SIGNATURE: u32 = 0x0606_4b50;
const ZIP64_EOCD_LEN: usize = 56;
const ENTRY_SIGNATURE: u32 = 0x0201_4b50;
const ENTRY_LEN: usize = 46;
/// The zip comment is at most this long, so the end record is within the last
/// `EOCD_LEN + MAX_COMMENT` bytes.
const MAX_COMMENT: usize = 0xffff;
/// The most of a central directory read (a million entries or so).
pub const MAX_DIRECTORY: u64 = 64 * 1024 * 1024;

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// Where the central directory is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Directory {
    /// At `offset`, `size` bytes.
    At { offset: u64, size: u64 },
    /// A zip64 archive: its zip64 end record (56 bytes) is at this offset.
    Zip64 { record: u64 },
}

/// Finds the central directory from the last bytes of a zip (`tail`, which ends at the end
/// of the file of `file_len` bytes).
pub fn find_directory(tail: &[u8], file_len: u64) -> Result<Directory, ZipError> {
    let tail_start = file_len - tail.len() as u64;
    let damaged = ZipError::Damaged;
    // The last record whose comment length reaches exactly the end of the file.
    let at = (0..=tail.len().saturating_sub(EOCD_LEN))
        .rev()
        .find(|&i| {
            u32_at(tail, i) == Some(EOCD_SIGNATURE)
                && u16_at(tail, i + 20).map(usize::from) == Some(tail.len() - i - EOCD_LEN)
        })
        .ok_or(ZipError::NoDirectory)?;
    let eocd = &tail[at..];
    let (disk, cd_disk) = (
        u16_at(eocd, 4).ok_or(damaged("end record"))?,
        u16_at(eocd, 6).ok_or(damaged("end record"))?,
    );
    let size = u32_at(eocd, 12).ok_or(damaged("end record"))?;
    let offset = u32_at(eocd, 16).ok_or(damaged("end record"))?;
    if size == u32::MAX || offset == u32::MAX || disk == u16::MAX {
        let locator = at
            .checked_sub(ZIP64_LOCATOR_LEN)
            .and_then(|l| tail.get(l..at))
            .filter(|l| u32_at(l, 0) == Some(ZIP64_LOCATOR_SIGNATURE))
            .ok_or(damaged("zip64 end record locator missing"))?;
        let record = u64_at(locator, 8).ok_or(damaged("zip64 locator"))?;
        // Checked: offsets come from the file, a crafted one must not wrap around.
        let end = record.checked_add(ZIP64_EOCD_LEN as u64);
        if end.is_none_or(|end| end > tail_start + at as u64) {
            return Err(damaged("zip64 end record past the end"));
        }
        return Ok(Directory::Zip64 { record });
    }
    if disk != 0 || cd_disk != 0 {
        return Err(ZipError::MultiDisk);
    }
    let (offset, size) = (u64::from(offset), u64::from(size));
    if offset
        .checked_add(size)
        .is_none_or(|end| end > tail_start + at as u64)
    {
        return Err(damaged("central directory past its end record"));
    }
    Ok(Directory::At { offset, size })
}

/// The central directory's place from a zip64 end record.
pub fn zip64_directory(record: &[u8]) -> Result<(u64, u64), ZipError> {
    let damaged = ZipError::Damaged;
    if u32_at(record, 0) != Some(ZIP64_EOCD_SIGNATURE) {
        return Err(damaged("zip64 end record"));
    }
    let disk = u32_at(record, 16).ok_or(damaged("zip64 end record"))?;
    let cd_disk = u32_at(record, 20).ok_or(damaged("zip64 end record"))?;
    if disk != 0 || cd_disk != 0 {
        return Err(ZipError::MultiDisk);
    }
    let size = u64_at(record, 40).ok_or(damaged("zip64 end record"))?;
    let offset = u64_at(record, 48).ok_or(damaged("zip64 end record"))?;
    Ok((offset, size))
}

/// The entry names of a central directory.
pub fn entry_names(directory: &[u8]) -> Result<Vec<String>, ZipError> {
    let mut names = Vec::new();
    let mut at = 0;
    while at < directory.len() {
        let entry = &directory[at..];
        if u32_at(entry, 0) != Some(ENTRY_SIGNATURE) {
            return Err(ZipError::Damaged("central directory entry"));
        }
        let field = |i| {
            u16_at(entry, i)
                .map(usize::from)
                .ok_or(ZipError::Damaged("central directory entry"))
        };
        let (name_len, extra_len, comment_len) = (field(28)?, field(30)?, field(32)?);
        let name = entry
            .get(ENTRY_LEN..ENTRY_LEN + name_len)
            .ok_or(ZipError::Damaged("central directory entry name"))?;
        names.push(String::from_utf8_lossy(name).into_owned());
        at += ENTRY_LEN + name_len + extra_len + comment_len;
    }
    Ok(names)
}

/// Reading the archive file failed.
#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    #[error("reading the archive {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the archive {path}: {source}")]
    Zip {
        path: PathBuf,
        #[source]
        source: ZipError,
    },
}

/// What the zip file at `path` holds, read from its central directory only.
pub async fn contents(path: &Path) -> Result<ArchiveContents, ArchiveError> {
    let io = |source| ArchiveError::Io {
        path: path.to_path_buf(),
        source,
    };
    let zip = |source| ArchiveError::Zip {
        path: path.to_path_buf(),
        source,
    };
    let mut file = tokio::fs::File::open(path).await.map_err(io)?;
    let len = file.metadata().await.map_err(io)?.len();
    let read_at = async |file: &mut tokio::fs::File, offset: u64, size: u64| {
        file.seek(std::io::SeekFrom::Start(offset)).await?;
        let mut buffer = vec![0; usize::try_from(size).unwrap_or(usize::MAX)];
        file.read_exact(&mut buffer).await?;
        Ok::<_, std::io::Error>(buffer)
    };
    let tail_len = len.min((EOCD_LEN + MAX_COMMENT + ZIP64_LOCATOR_LEN) as u64);
    let tail = read_at(&mut file, len - tail_len, tail_len)
        .await
        .map_err(io)?;
    let (offset, size) = match find_directory(&tail, len).map_err(zip)? {
        Directory::At { offset, size } => (offset, size),
        Directory::Zip64 { record } => {
            let record = read_at(&mut file, record, ZIP64_EOCD_LEN as u64)
                .await
                .map_err(io)?;
            zip64_directory(&record).map_err(zip)?
        }
    };
    if size > MAX_DIRECTORY {
        return Err(zip(ZipError::TooLarge(size)));
    }
    if offset.checked_add(size).is_none_or(|end| end > len) {
        return Err(zip(ZipError::Damaged("central directory past the end")));
    }
    let directory = read_at(&mut file, offset, size).await.map_err(io)?;
    let names = entry_names(&directory).map_err(zip)?;
    Ok(ArchiveContents::from_entries(
        names.iter().map(String::as_str),
    ))
}

/// A local archive file, deleted when dropped.
#[derive(Debug)]
pub struct ArchiveFile {
    path: PathBuf,
    /// Kept (renamed away) instead of deleted.
    kept: bool,
}

impl ArchiveFile {
    /// The (not yet created) file for the restore job `job` in `dir`.
    pub fn new(dir: &Path, job: &str) -> Self {
        Self::at(dir.join(format!("{FILE_PREFIX}{job}.zip")))
    }

    /// The (not yet created) file `path`.
    pub fn at(path: PathBuf) -> Self {
        Self { path, kept: false }
    }

    /// Renames the file to `to` (same file system) and keeps it there.
    pub async fn persist(mut self, to: &Path) -> std::io::Result<()> {
        tokio::fs::rename(&self.path, to).await?;
        self.kept = true;
        Ok(())
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Streams the backup job `backup_job` of `source` into the file (created or truncated);
    /// returns its size.
    pub async fn download(
        &self,
        source: &infinispan_rest::Client,
        backup_job: &str,
        limit: u64,
    ) -> Result<u64, infinispan_rest::Error> {
        let local = |e: std::io::Error| infinispan_rest::Error::Local {
            what: format!("the archive file {}", self.path.display()),
            message: e.to_string(),
        };
        if let Some(dir) = self.path.parent() {
            tokio::fs::create_dir_all(dir).await.map_err(local)?;
        }
        let mut file = tokio::fs::File::create(&self.path).await.map_err(local)?;
        let written = source
            .download_backup_bounded(backup_job, &mut file, limit)
            .await?;
        file.sync_all().await.map_err(local)?;
        Ok(written)
    }
}

impl Drop for ArchiveFile {
    fn drop(&mut self) {
        if self.kept {
            return;
        }
        match std::fs::remove_file(&self.path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                tracing::warn!(path = %self.path.display(), error = %e, "cannot delete an archive file")
            }
        }
    }
}

/// Deletes archive files a killed operator left in `dir`; returns how many.
pub fn remove_leftovers(dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.starts_with(FILE_PREFIX) && n.ends_with(".zip"))
        })
        .filter(|e| std::fs::remove_file(e.path()).is_ok())
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A zip written by Infinispan 16.0.7 (`"caches":["people","plain"]`, everything else
    /// `*`): the test fixture `testdata/backup-16.0.7.zip`.
    const SERVER_ARCHIVE: &[u8] = include_bytes!("testdata/backup-16.0.7.zip");

    fn temp_dir(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "cluster-operator-archive-{tag}-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        std::fs::create_dir_all(&dir).expect("dir");
        dir
    }

    #[test]
    fn classifies_the_entries_of_a_server_archive() {
        let names = [
            "manifest.properties",
            "containers/default/global.xml",
            "containers/default/tasks/hello",
            "containers/default/counters/counters.dat",
            "containers/default/templates/tmpl1.xml",
            "containers/default/proto-schemas/person.proto",
            "containers/default/caches/plain/plain.dat",
            "containers/default/caches/plain/plain.xml",
            "containers/default/caches/___infinispan-operator.epoch.abc/___infinispan-operator.epoch.abc.xml",
            "containers/default/caches/a/b/a/b.xml",
            "containers/default/caches/odd/other.xml",
            "containers/default/caches/",
        ];
        let c = ArchiveContents::from_entries(names);
        assert_eq!(
            c.caches,
            ["plain", "___infinispan-operator.epoch.abc", "a/b"]
                .map(String::from)
                .into()
        );
        assert_eq!(c.templates, ["tmpl1"].map(String::from).into());
        assert_eq!(c.schemas, ["person.proto"].map(String::from).into());
        assert_eq!(c.tasks, ["hello"].map(String::from).into());
        assert!(c.has_counters);
        assert_eq!(
            ArchiveContents::from_entries([]),
            ArchiveContents::default()
        );
    }

    #[tokio::test]
    async fn reads_the_listing_of_a_real_server_archive() {
        let dir = temp_dir("real");
        let path = dir.join("a.zip");
        std::fs::write(&path, SERVER_ARCHIVE).expect("write");
        let c = contents(&path).await.expect("contents");
        assert_eq!(c.caches, ["people", "plain"].map(String::from).into());
        assert_eq!(c.templates, ["tmpl1"].map(String::from).into());
        assert_eq!(c.schemas, ["person.proto"].map(String::from).into());
        assert_eq!(c.tasks, ["hello"].map(String::from).into());
        assert!(c.has_counters);

        // with a zip comment, the end record is found before it
        let mut commented = SERVER_ARCHIVE.to_vec();
        let n = commented.len();
        commented[n - 2..].copy_from_slice(&5u16.to_le_bytes());
        commented.extend_from_slice(b"hello");
        std::fs::write(&path, &commented).expect("write");
        assert_eq!(contents(&path).await.expect("commented"), c);

        // not a zip, a truncated zip
        std::fs::write(&path, b"ISPN012042: Backup failed").expect("write");
        assert!(matches!(
            contents(&path).await,
            Err(ArchiveError::Zip {
                source: ZipError::NoDirectory,
                ..
            })
        ));
        std::fs::write(&path, &SERVER_ARCHIVE[SERVER_ARCHIVE.len() / 2..]).expect("write");
        assert!(matches!(
            contents(&path).await,
            Err(ArchiveError::Zip { .. })
        ));
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }

    /// One central directory entry for `name` (fields other than the lengths are zero).
    fn entry(name: &str) -> Vec<u8> {
        let mut e = Vec::new();
        e.extend_from_slice(&ENTRY_SIGNATURE.to_le_bytes());
        e.extend_from_slice(&[0; 24]);
        e.extend_from_slice(&(name.len() as u16).to_le_bytes());
        e.extend_from_slice(&3u16.to_le_bytes()); // extra
        e.extend_from_slice(&1u16.to_le_bytes()); // comment
        e.extend_from_slice(&[0; 12]);
        e.extend_from_slice(name.as_bytes());
        e.extend_from_slice(b"xyzc");
        e
    }

    #[test]
    fn reads_a_zip64_end_record() {
        // data, central directory, zip64 end record, locator, end record with 0xffffffff
        let data = vec![0u8; 10];
        let directory: Vec<u8> = [
            entry("containers/default/tasks/t"),
            entry("manifest.properties"),
        ]
        .concat();
        let cd_offset = data.len() as u64;
        let record_offset = cd_offset + directory.len() as u64;
        let tail = zip64_tail(record_offset, cd_offset, directory.len() as u64, 2);
        let record = tail[..ZIP64_EOCD_LEN].to_vec();
        let file = [data, directory.clone(), tail].concat();
        let len = file.len() as u64;
        assert_eq!(
            find_directory(&file, len),
            Ok(Directory::Zip64 {
                record: record_offset
            })
        );
        assert_eq!(
            zip64_directory(&record),
            Ok((cd_offset, directory.len() as u64))
        );
        assert_eq!(
            entry_names(&directory).expect("names"),
            vec!["containers/default/tasks/t", "manifest.properties"]
        );
        assert!(entry_names(&directory[1..]).is_err());
        // the tail alone (a suffix of the file) is enough
        assert_eq!(
            find_directory(&file[file.len() - 60..], len),
            Ok(Directory::Zip64 {
                record: record_offset
            })
        );
    }

    /// The end of a zip64 file: its zip64 end record (saying the central directory of
    /// `entries` entries is at `cd_offset` with `cd_size` bytes), the locator naming the
    /// record's offset `record_offset`, and the end record pointing to them (0xffffffff).
    fn zip64_tail(record_offset: u64, cd_offset: u64, cd_size: u64, entries: u64) -> Vec<u8> {
        let mut record = Vec::new();
        record.extend_from_slice(&ZIP64_EOCD_SIGNATURE.to_le_bytes());
        record.extend_from_slice(&44u64.to_le_bytes());
        record.extend_from_slice(&[0; 4]); // versions
        record.extend_from_slice(&[0; 8]); // disks
        record.extend_from_slice(&entries.to_le_bytes());
        record.extend_from_slice(&entries.to_le_bytes());
        record.extend_from_slice(&cd_size.to_le_bytes());
        record.extend_from_slice(&cd_offset.to_le_bytes());
        assert_eq!(record.len(), ZIP64_EOCD_LEN);
        let mut locator = Vec::new();
        locator.extend_from_slice(&ZIP64_LOCATOR_SIGNATURE.to_le_bytes());
        locator.extend_from_slice(&0u32.to_le_bytes());
        locator.extend_from_slice(&record_offset.to_le_bytes());
        locator.extend_from_slice(&1u32.to_le_bytes());
        let mut eocd = Vec::new();
        eocd.extend_from_slice(&EOCD_SIGNATURE.to_le_bytes());
        eocd.extend_from_slice(&[0; 4]);
        eocd.extend_from_slice(&0xffffu16.to_le_bytes());
        eocd.extend_from_slice(&0xffffu16.to_le_bytes());
        eocd.extend_from_slice(&u32::MAX.to_le_bytes());
        eocd.extend_from_slice(&u32::MAX.to_le_bytes());
        eocd.extend_from_slice(&0u16.to_le_bytes());
        [record, locator, eocd].concat()
    }

    /// Offsets near the top of the range (a crafted archive) are refused as damaged; they never
    /// wrap around past the bound checks.
    #[tokio::test]
    async fn offsets_that_would_overflow_are_damage() {
        let file = zip64_tail(u64::MAX - 10, 0, 0, 0);
        assert!(matches!(
            find_directory(&file, file.len() as u64),
            Err(ZipError::Damaged(_))
        ));
        let dir = temp_dir("overflow");
        let path = dir.join("crafted.zip");
        std::fs::write(&path, zip64_tail(0, u64::MAX - 5, 10, 0)).expect("write");
        let error = contents(&path).await.expect_err("damaged");
        assert!(
            matches!(
                &error,
                ArchiveError::Zip {
                    source: ZipError::Damaged(_),
                    ..
                }
            ),
            "{error:?}"
        );
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }

    #[tokio::test]
    async fn the_file_goes_when_dropped_and_leftovers_at_start() {
        let dir = temp_dir("files");
        let file = ArchiveFile::new(&dir, "ns.r-0123");
        assert_eq!(
            file.path().file_name().and_then(|n| n.to_str()),
            Some("infinispan-restore-ns.r-0123.zip")
        );
        std::fs::write(file.path(), b"x").expect("write");
        let path = file.path().to_path_buf();
        drop(file);
        assert!(!path.exists());
        std::fs::write(dir.join("infinispan-restore-old.zip"), b"x").expect("write");
        std::fs::write(dir.join("keep.zip"), b"x").expect("write");
        assert_eq!(remove_leftovers(&dir), 1);
        assert!(dir.join("keep.zip").exists());
        assert_eq!(remove_leftovers(&dir.join("missing")), 0);
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }
}
