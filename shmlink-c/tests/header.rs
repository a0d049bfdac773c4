//! `include/shmlink.h` is what cbindgen makes of `src/lib.rs` with `cbindgen.toml`: a change to
//! the C API that did not regenerate the header fails here. `SHMLINK_BLESS=1 cargo test -p
//! shmlink-c --test header` writes it.

#[test]
fn the_header_is_what_the_code_says() {
    let dir = env!("CARGO_MANIFEST_DIR");
    let config =
        cbindgen::Config::from_file(format!("{dir}/cbindgen.toml")).expect("cbindgen.toml");
    let bindings = cbindgen::Builder::new()
        .with_crate(dir)
        .with_config(config)
        .generate()
        .expect("cbindgen reads the crate");
    let mut made = Vec::new();
    bindings.write(&mut made);
    let path = format!("{dir}/include/shmlink.h");
    if std::env::var_os("SHMLINK_BLESS").is_some() {
        std::fs::write(&path, &made).expect("writing the header");
    }
    let checked_in = std::fs::read(&path).unwrap_or_default();
    assert!(
        checked_in == made,
        "include/shmlink.h is not what the code says: run SHMLINK_BLESS=1 cargo test -p shmlink-c \
         --test header, and commit it"
    );
}
