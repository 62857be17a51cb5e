//! The committed C header must be exactly what cbindgen generates from src/ today.

#[test]
fn committed_header_matches_generated() {
    let generated_path = env!("CCV1D_GENERATED_HEADER");
    let committed_path = concat!(env!("CARGO_MANIFEST_DIR"), "/include/causal_conv1d.h");
    let generated = std::fs::read_to_string(generated_path)
        .unwrap_or_else(|e| panic!("cannot read the generated header {generated_path}: {e}"));
    let committed = std::fs::read_to_string(committed_path)
        .unwrap_or_else(|e| panic!("cannot read the committed header {committed_path}: {e}"));
    assert!(generated.contains("ccv1d_fwd_params"), "generated header {generated_path} looks empty");
    if generated != committed {
        let first = generated
            .lines()
            .zip(committed.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| generated.lines().count().min(committed.lines().count()));
        panic!(
            "include/causal_conv1d.h is out of date with src/ (first difference at line {}):\n  \
             generated: {:?}\n  committed: {:?}\nRegenerate it with:\n  cp {generated_path} include/causal_conv1d.h",
            first + 1,
            generated.lines().nth(first).unwrap_or("<end of file>"),
            committed.lines().nth(first).unwrap_or("<end of file>"),
        );
    }
}
