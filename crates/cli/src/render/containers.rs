//! The containers of a card directory (`pivgate pki issue-card --out`,
//! `pivgate read --save`): their file names, the list `issue-card` prints
//! and the files `read --save` writes. What each container says is
//! `auth::containers`.

use anyhow::Context;
use auth::containers::ContainerEntry;
use piv::DataObject;
use std::path::Path;

/// The file names of the containers in a card directory (`pivgate pki
/// issue-card --out`, `pivgate read --save`): the CHUID's and those of
/// [`pki_issue::containers::CONTAINER_FILES`].
pub fn container_files() -> impl Iterator<Item = (DataObject, &'static str)> {
    std::iter::once((DataObject::Chuid, "chuid.bin")).chain(pki_issue::containers::CONTAINER_FILES)
}

/// Writes each container read into `dir` under the names of
/// [`container_files`] (others as TAG.bin).
pub fn save_containers(dir: &Path, entries: &[ContainerEntry]) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    for e in entries {
        let Some(content) = &e.content else { continue };
        let name = container_files()
            .find(|(o, _)| format!("{:X}", o.tag()) == e.tag)
            .map(|(_, f)| f.to_string())
            .unwrap_or_else(|| format!("{}.bin", e.tag));
        let p = dir.join(name);
        std::fs::write(&p, content).with_context(|| format!("writing {}", p.display()))?;
    }
    Ok(())
}
