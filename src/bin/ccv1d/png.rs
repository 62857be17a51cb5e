//! A PNG encoder for the bench plot: 8-bit RGB, no interlace, filter type 0 on every row,
//! one IDAT holding a zlib stream of a single fixed-Huffman deflate block. The only matches
//! searched are the previous pixel (distance 3) and the same byte one row up (distance = row
//! length), which is what a chart on a plain background repeats; a 1200x800 plot comes to tens
//! of KiB instead of 2.9 MB stored. CRC-32 and Adler-32 are computed here.

const SIGNATURE: [u8; 8] = [0x89, b'P', b'N', b'G', b'\r', b'\n', 0x1a, b'\n'];

/// PNG file bytes of a `width`×`height` image, `rgb` row-major, top row first.
pub fn encode(width: usize, height: usize, rgb: &[[u8; 3]]) -> Vec<u8> {
    assert_eq!(rgb.len(), width * height, "pixel count");
    assert!(width > 0 && height > 0 && width <= u32::MAX as usize && height <= u32::MAX as usize);
    let row_len = 1 + 3 * width;
    let mut raw = Vec::with_capacity(row_len * height);
    for row in rgb.chunks(width) {
        raw.push(0); // filter type 0 (None)
        raw.extend(row.iter().flatten());
    }
    let mut ihdr = Vec::with_capacity(13);
    ihdr.extend((width as u32).to_be_bytes());
    ihdr.extend((height as u32).to_be_bytes());
    // bit depth 8, colour type 2 (RGB), compression 0, filter method 0, no interlace
    ihdr.extend([8, 2, 0, 0, 0]);
    let mut png = SIGNATURE.to_vec();
    chunk(&mut png, b"IHDR", &ihdr);
    chunk(&mut png, b"IDAT", &zlib(&raw, row_len));
    chunk(&mut png, b"IEND", &[]);
    png
}

fn chunk(out: &mut Vec<u8>, kind: &[u8; 4], body: &[u8]) {
    out.extend((body.len() as u32).to_be_bytes());
    let start = out.len();
    out.extend(kind);
    out.extend(body);
    let crc = crc32(&out[start..]);
    out.extend(crc.to_be_bytes());
}

/// CRC-32 (ISO 3309 / PNG: reflected polynomial 0xEDB88320, initial and final xor all ones).
pub fn crc32(bytes: &[u8]) -> u32 {
    const TABLE: [u32; 256] = {
        let mut t = [0u32; 256];
        let mut n = 0;
        while n < 256 {
            let mut c = n as u32;
            let mut k = 0;
            while k < 8 {
                c = if c & 1 == 1 { 0xEDB8_8320 ^ (c >> 1) } else { c >> 1 };
                k += 1;
            }
            t[n] = c;
            n += 1;
        }
        t
    };
    !bytes.iter().fold(!0u32, |c, &b| TABLE[((c ^ b as u32) & 0xff) as usize] ^ (c >> 8))
}

/// Adler-32 (RFC 1950).
pub fn adler32(bytes: &[u8]) -> u32 {
    const MOD: u32 = 65521;
    let (mut a, mut b) = (1u32, 0u32);
    // 5552 bytes is the most that can be summed before b may overflow u32.
    for block in bytes.chunks(5552) {
        for &x in block {
            a += x as u32;
            b += a;
        }
        a %= MOD;
        b %= MOD;
    }
    (b << 16) | a
}

/// zlib stream (RFC 1950): header for deflate with a 32 KiB window, the data, Adler-32.
fn zlib(data: &[u8], row_len: usize) -> Vec<u8> {
    // 0x78 0x01: CM 8, CINFO 7, no dictionary, (0x7801 % 31 == 0).
    let mut out = vec![0x78, 0x01];
    deflate_fixed(data, row_len, &mut out);
    out.extend(adler32(data).to_be_bytes());
    out
}

/// LSB-first bit writer (RFC 1951 3.1.1).
struct Bits<'a> {
    out: &'a mut Vec<u8>,
    acc: u64,
    n: u32,
}

impl Bits<'_> {
    /// `count` low bits of `v`, least significant first (header fields, extra bits).
    fn put(&mut self, v: u32, count: u32) {
        self.acc |= (v as u64) << self.n;
        self.n += count;
        while self.n >= 8 {
            self.out.push(self.acc as u8);
            self.acc >>= 8;
            self.n -= 8;
        }
    }
    /// A Huffman code of `len` bits, most significant bit first.
    fn code(&mut self, code: u32, len: u32) {
        self.put(code.reverse_bits() >> (32 - len), len);
    }
    fn flush(&mut self) {
        if self.n > 0 {
            self.out.push(self.acc as u8);
        }
        self.acc = 0;
        self.n = 0;
    }
}

const LEN_BASE: [u16; 29] = [3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258];
const LEN_EXTRA: [u8; 29] = [0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0];
const DIST_BASE: [u16; 30] = [
    1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513, 769, 1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577,
];
const DIST_EXTRA: [u8; 30] = [0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13];
const MAX_MATCH: usize = 258;
const WINDOW: usize = 32768;

/// Literal/length symbol in the fixed Huffman code (RFC 1951 3.2.6).
fn fixed_symbol(bits: &mut Bits, sym: u32) {
    match sym {
        0..=143 => bits.code(0x30 + sym, 8),
        144..=255 => bits.code(0x190 + sym - 144, 9),
        256..=279 => bits.code(sym - 256, 7),
        _ => bits.code(0xC0 + sym - 280, 8),
    }
}

/// One final deflate block with the fixed Huffman code.
fn deflate_fixed(data: &[u8], row_len: usize, out: &mut Vec<u8>) {
    let mut bits = Bits { out, acc: 0, n: 0 };
    bits.put(1, 1); // BFINAL
    bits.put(1, 2); // BTYPE 01: fixed Huffman
    let mut i = 0;
    while i < data.len() {
        let (mut len, mut dist) = (0, 0);
        for d in [3, row_len] {
            if d == 0 || d > i || d > WINDOW {
                continue;
            }
            let max = MAX_MATCH.min(data.len() - i);
            let l = (0..max).take_while(|&k| data[i + k] == data[i - d + k]).count();
            if l > len {
                (len, dist) = (l, d);
            }
        }
        if len < 3 {
            fixed_symbol(&mut bits, data[i] as u32);
            i += 1;
            continue;
        }
        let lc = LEN_BASE.iter().rposition(|&b| b as usize <= len).unwrap();
        fixed_symbol(&mut bits, 257 + lc as u32);
        bits.put((len - LEN_BASE[lc] as usize) as u32, LEN_EXTRA[lc] as u32);
        let dc = DIST_BASE.iter().rposition(|&b| b as usize <= dist).unwrap();
        bits.code(dc as u32, 5);
        bits.put((dist - DIST_BASE[dc] as usize) as u32, DIST_EXTRA[dc] as u32);
        i += len;
    }
    fixed_symbol(&mut bits, 256); // end of block
    bits.flush();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checksums_match_reference_values() {
        // The CRC-32 check value of the catalogue of parametrised CRCs, and the Adler-32 example
        // of RFC 1950's Wikipedia page.
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(crc32(b""), 0);
        assert_eq!(crc32(b"IEND"), 0xAE42_6082, "the CRC every PNG ends with");
        assert_eq!(adler32(b"Wikipedia"), 0x11E6_0398);
        assert_eq!(adler32(b""), 1);
        // Long input: the modulo reduction per block.
        let big = vec![0xffu8; 100_000];
        let (mut a, mut b) = (1u64, 0u64);
        for &x in &big {
            a = (a + x as u64) % 65521;
            b = (b + a) % 65521;
        }
        assert_eq!(adler32(&big), ((b << 16) | a) as u32);
    }

    #[test]
    fn chunks_framed_with_crc() {
        let png = encode(2, 1, &[[1, 2, 3], [4, 5, 6]]);
        assert_eq!(png[..8], SIGNATURE);
        assert_eq!(&png[8..16], &[0, 0, 0, 13, b'I', b'H', b'D', b'R']);
        assert_eq!(&png[16..29], &[0, 0, 0, 2, 0, 0, 0, 1, 8, 2, 0, 0, 0]);
        assert_eq!(u32::from_be_bytes(png[29..33].try_into().unwrap()), crc32(&png[12..29]));
        assert_eq!(&png[png.len() - 12..], &[0, 0, 0, 0, b'I', b'E', b'N', b'D', 0xAE, 0x42, 0x60, 0x82]);
    }
}

/// Decoding by Python's zlib (tests/png_check.py): an implementation independent of this one.
#[cfg(test)]
mod python_decode {
    use super::encode;
    use std::process::Command;

    #[test]
    fn python_zlib_decodes_the_pixels() {
        // Runs of one colour (distance-3 matches), rows repeating the row above, and noise
        // (literals), at a width whose row is longer than the longest match.
        let (w, h) = (130, 40);
        let mut px = vec![[255u8, 255, 255]; w * h];
        let mut state = 0x1234_5678u32;
        for y in 0..h {
            for x in 0..w {
                px[y * w + x] = match (x / 20 + y / 10) % 3 {
                    0 => [255, 255, 255],
                    1 => [(x * 2) as u8, (y * 5) as u8, 7],
                    _ => {
                        state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                        [(state >> 24) as u8, (state >> 16) as u8, (state >> 8) as u8]
                    }
                };
            }
        }
        let dir = std::env::temp_dir();
        let png = dir.join(format!("ccv1d_png_unit_{}.png", std::process::id()));
        let raw = dir.join(format!("ccv1d_png_unit_{}.rgb", std::process::id()));
        std::fs::write(&png, encode(w, h, &px)).unwrap();
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/png_check.py");
        let out = match Command::new("python3").arg(script).arg(&png).arg(&raw).output() {
            Ok(o) => o,
            Err(e) => {
                let _ = std::fs::remove_file(&png);
                assert!(std::env::var("CI").as_deref() != Ok("true"), "python3 is needed to check the PNG encoder: {e}");
                eprintln!("SKIPPED: python3 not runnable ({e}); the PNG encoder is not checked against zlib");
                return;
            }
        };
        let decoded = std::fs::read(&raw).unwrap_or_default();
        let _ = (std::fs::remove_file(&png), std::fs::remove_file(&raw));
        assert!(out.status.success(), "png_check.py: {}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(String::from_utf8_lossy(&out.stdout).starts_with("130 40 "), "{}", String::from_utf8_lossy(&out.stdout));
        let want: Vec<u8> = px.iter().flatten().copied().collect();
        assert!(decoded == want, "decoded pixels differ from the encoded ones");
    }
}
