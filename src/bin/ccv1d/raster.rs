//! A tiny RGB raster for `ccv1d bench --plot`: filled rectangles, thick lines, dashed
//! horizontal lines, filled markers, and text in a built-in 5x8 bitmap font (ASCII 32..126)
//! at any integer scale. No anti-aliasing: the chart is drawn at a size where it is not needed.

pub type Rgb = [u8; 3];

pub const WHITE: Rgb = [255, 255, 255];
pub const BLACK: Rgb = [0, 0, 0];

/// Glyph cell: 5 columns, 8 rows (rows 0-6 above the baseline, row 7 for descenders);
/// text advances 6 columns per character and 10 rows per line, at scale 1.
pub const GLYPH_W: usize = 5;
pub const ADVANCE: usize = 6;
pub const LINE: usize = 10;

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Marker {
    Circle,
    Square,
    Diamond,
    TriangleUp,
}

pub struct Canvas {
    pub width: usize,
    pub height: usize,
    /// Row-major, top row first.
    pub pixels: Vec<Rgb>,
}

impl Canvas {
    pub fn new(width: usize, height: usize, background: Rgb) -> Canvas {
        Canvas { width, height, pixels: vec![background; width * height] }
    }

    /// Set one pixel; coordinates outside the canvas are ignored (shapes are clipped).
    pub fn set(&mut self, x: i64, y: i64, c: Rgb) {
        if x >= 0 && y >= 0 && (x as usize) < self.width && (y as usize) < self.height {
            self.pixels[y as usize * self.width + x as usize] = c;
        }
    }

    #[cfg(test)]
    pub fn get(&self, x: usize, y: usize) -> Rgb {
        self.pixels[y * self.width + x]
    }

    /// Filled rectangle with corners (x0, y0) and (x1, y1), both inclusive, in any order.
    pub fn rect(&mut self, x0: i64, y0: i64, x1: i64, y1: i64, c: Rgb) {
        for y in y0.min(y1)..=y0.max(y1) {
            for x in x0.min(x1)..=x0.max(x1) {
                self.set(x, y, c);
            }
        }
    }

    /// Outline of a rectangle, `thick` pixels wide, inside the corners.
    pub fn frame(&mut self, x0: i64, y0: i64, x1: i64, y1: i64, thick: i64, c: Rgb) {
        let t = thick - 1;
        self.rect(x0, y0, x1, y0 + t, c);
        self.rect(x0, y1 - t, x1, y1, c);
        self.rect(x0, y0, x0 + t, y1, c);
        self.rect(x1 - t, y0, x1, y1, c);
    }

    /// A line from (x0, y0) to (x1, y1), `thick` pixels wide: a square of that size stamped at
    /// every step along the longer axis.
    pub fn line(&mut self, (x0, y0): (f64, f64), (x1, y1): (f64, f64), thick: i64, c: Rgb) {
        let steps = (x1 - x0).abs().max((y1 - y0).abs()).ceil().max(1.0) as i64;
        let lo = (thick - 1) / 2;
        for i in 0..=steps {
            let f = i as f64 / steps as f64;
            let x = (x0 + f * (x1 - x0)).round() as i64 - lo;
            let y = (y0 + f * (y1 - y0)).round() as i64 - lo;
            self.rect(x, y, x + thick - 1, y + thick - 1, c);
        }
    }

    /// A dashed horizontal line at row `y` from x0 to x1: `dash` pixels drawn, `gap` skipped.
    pub fn dashed_hline(&mut self, x0: i64, x1: i64, y: i64, (dash, gap): (i64, i64), thick: i64, c: Rgb) {
        let lo = (thick - 1) / 2;
        let mut x = x0;
        while x <= x1 {
            self.rect(x, y - lo, (x + dash - 1).min(x1), y - lo + thick - 1, c);
            x += dash + gap;
        }
    }

    /// A filled marker of "radius" `r` centred on (cx, cy).
    pub fn marker(&mut self, cx: f64, cy: f64, r: i64, shape: Marker, c: Rgb) {
        let (cx, cy) = (cx.round() as i64, cy.round() as i64);
        for dy in -r..=r {
            for dx in -r..=r {
                let inside = match shape {
                    Marker::Circle => dx * dx + dy * dy <= r * r + r / 2,
                    Marker::Square => dx.abs() < r && dy.abs() < r,
                    Marker::Diamond => dx.abs() + dy.abs() <= r,
                    // Apex at the top: the half-width grows from 0 to r over the height.
                    Marker::TriangleUp => 2 * dx.abs() <= dy + r,
                };
                if inside {
                    self.set(cx + dx, cy + dy, c);
                }
            }
        }
    }

    /// Text with its top-left corner at (x, y), each font pixel drawn as a `scale`×`scale`
    /// block; characters outside ASCII 32..126 are drawn as '?'. Returns the width drawn.
    pub fn text(&mut self, x: i64, y: i64, s: &str, scale: usize, c: Rgb) -> i64 {
        let k = scale as i64;
        for (i, ch) in s.chars().enumerate() {
            let glyph = glyph(ch);
            let gx = x + (i * ADVANCE * scale) as i64;
            for (row, bits) in glyph.iter().enumerate() {
                for col in 0..GLYPH_W {
                    if bits >> (GLYPH_W - 1 - col) & 1 == 1 {
                        let (px, py) = (gx + col as i64 * k, y + row as i64 * k);
                        self.rect(px, py, px + k - 1, py + k - 1, c);
                    }
                }
            }
        }
        text_width(s, scale)
    }
}

/// Width in pixels of `s` at `scale` (no trailing gap after the last character).
pub fn text_width(s: &str, scale: usize) -> i64 {
    let n = s.chars().count();
    if n == 0 {
        0
    } else {
        ((n * ADVANCE - (ADVANCE - GLYPH_W)) * scale) as i64
    }
}

fn glyph(ch: char) -> &'static [u8; 8] {
    let i = ch as usize;
    if (32..127).contains(&i) {
        &FONT[i - 32]
    } else {
        &FONT[b'?' as usize - 32]
    }
}

/// ASCII 32..126, one glyph per line: 8 rows of 5 bits, most significant bit = leftmost column.
#[rustfmt::skip]
const FONT: [[u8; 8]; 95] = [
    [0b00000, 0b00000, 0b00000, 0b00000, 0b00000, 0b00000, 0b00000, 0b00000], // ' '
    [0b00100, 0b00100, 0b00100, 0b00100, 0b00100, 0b00000, 0b00100, 0b00000], // '!'
    [0b01010, 0b01010, 0b01010, 0b00000, 0b00000, 0b00000, 0b00000, 0b00000], // '"'
    [0b01010, 0b01010, 0b11111, 0b01010, 0b11111, 0b01010, 0b01010, 0b00000], // '#'
    [0b00100, 0b01111, 0b10100, 0b01110, 0b00101, 0b11110, 0b00100, 0b00000], // '$'
    [0b11000, 0b11001, 0b00010, 0b00100, 0b01000, 0b10011, 0b00011, 0b00000], // '%'
    [0b01100, 0b10010, 0b10100, 0b01000, 0b10101, 0b10010, 0b01101, 0b00000], // '&'
    [0b00100, 0b00100, 0b01000, 0b00000, 0b00000, 0b00000, 0b00000, 0b00000], // '\''
    [0b00010, 0b00100, 0b01000, 0b01000, 0b01000, 0b00100, 0b00010, 0b00000], // '('
    [0b01000, 0b00100, 0b00010, 0b00010, 0b00010, 0b00100, 0b01000, 0b00000], // ')'
    [0b00000, 0b00100, 0b10101, 0b01110, 0b10101, 0b00100, 0b00000, 0b00000], // '*'
    [0b00000, 0b00100, 0b00100, 0b11111, 0b00100, 0b00100, 0b00000, 0b00000], // '+'
    [0b00000, 0b00000, 0b00000, 0b00000, 0b00000, 0b01100, 0b00100, 0b01000], // ','
    [0b00000, 0b00000, 0b00000, 0b11111, 0b00000, 0b00000, 0b00000, 0b00000], // '-'
    [0b00000, 0b00000, 0b00000, 0b00000, 0b00000, 0b01100, 0b01100, 0b00000], // '.'
    [0b00000, 0b00001, 0b00010, 0b00100, 0b01000, 0b10000, 0b00000, 0b00000], // '/'
    [0b01110, 0b10001, 0b10011, 0b10101, 0b11001, 0b10001, 0b01110, 0b00000], // '0'
    [0b00100, 0b01100, 0b00100, 0b00100, 0b00100, 0b00100, 0b01110, 0b00000], // '1'
    [0b01110, 0b10001, 0b00001, 0b00010, 0b00100, 0b01000, 0b11111, 0b00000], // '2'
    [0b11111, 0b00010, 0b00100, 0b00010, 0b00001, 0b10001, 0b01110, 0b00000], // '3'
    [0b00010, 0b00110, 0b01010, 0b10010, 0b11111, 0b00010, 0b00010, 0b00000], // '4'
    [0b11111, 0b10000, 0b11110, 0b00001, 0b00001, 0b10001, 0b01110, 0b00000], // '5'
    [0b00110, 0b01000, 0b10000, 0b11110, 0b10001, 0b10001, 0b01110, 0b00000], // '6'
    [0b11111, 0b00001, 0b00010, 0b00100, 0b01000, 0b01000, 0b01000, 0b00000], // '7'
    [0b01110, 0b10001, 0b10001, 0b01110, 0b10001, 0b10001, 0b01110, 0b00000], // '8'
    [0b01110, 0b10001, 0b10001, 0b01111, 0b00001, 0b00010, 0b01100, 0b00000], // '9'
    [0b00000, 0b01100, 0b01100, 0b00000, 0b01100, 0b01100, 0b00000, 0b00000], // ':'
    [0b00000, 0b01100, 0b01100, 0b00000, 0b01100, 0b00100, 0b01000, 0b00000], // ';'
    [0b00010, 0b00100, 0b01000, 0b10000, 0b01000, 0b00100, 0b00010, 0b00000], // '<'
    [0b00000, 0b00000, 0b11111, 0b00000, 0b11111, 0b00000, 0b00000, 0b00000], // '='
    [0b01000, 0b00100, 0b00010, 0b00001, 0b00010, 0b00100, 0b01000, 0b00000], // '>'
    [0b01110, 0b10001, 0b00001, 0b00010, 0b00100, 0b00000, 0b00100, 0b00000], // '?'
    [0b01110, 0b10001, 0b00001, 0b01101, 0b10101, 0b10101, 0b01110, 0b00000], // '@'
    [0b01110, 0b10001, 0b10001, 0b11111, 0b10001, 0b10001, 0b10001, 0b00000], // 'A'
    [0b11110, 0b10001, 0b10001, 0b11110, 0b10001, 0b10001, 0b11110, 0b00000], // 'B'
    [0b01110, 0b10001, 0b10000, 0b10000, 0b10000, 0b10001, 0b01110, 0b00000], // 'C'
    [0b11100, 0b10010, 0b10001, 0b10001, 0b10001, 0b10010, 0b11100, 0b00000], // 'D'
    [0b11111, 0b10000, 0b10000, 0b11110, 0b10000, 0b10000, 0b11111, 0b00000], // 'E'
    [0b11111, 0b10000, 0b10000, 0b11110, 0b10000, 0b10000, 0b10000, 0b00000], // 'F'
    [0b01110, 0b10001, 0b10000, 0b10111, 0b10001, 0b10001, 0b01111, 0b00000], // 'G'
    [0b10001, 0b10001, 0b10001, 0b11111, 0b10001, 0b10001, 0b10001, 0b00000], // 'H'
    [0b01110, 0b00100, 0b00100, 0b00100, 0b00100, 0b00100, 0b01110, 0b00000], // 'I'
    [0b00111, 0b00010, 0b00010, 0b00010, 0b00010, 0b10010, 0b01100, 0b00000], // 'J'
    [0b10001, 0b10010, 0b10100, 0b11000, 0b10100, 0b10010, 0b10001, 0b00000], // 'K'
    [0b10000, 0b10000, 0b10000, 0b10000, 0b10000, 0b10000, 0b11111, 0b00000], // 'L'
    [0b10001, 0b11011, 0b10101, 0b10101, 0b10001, 0b10001, 0b10001, 0b00000], // 'M'
    [0b10001, 0b10001, 0b11001, 0b10101, 0b10011, 0b10001, 0b10001, 0b00000], // 'N'
    [0b01110, 0b10001, 0b10001, 0b10001, 0b10001, 0b10001, 0b01110, 0b00000], // 'O'
    [0b11110, 0b10001, 0b10001, 0b11110, 0b10000, 0b10000, 0b10000, 0b00000], // 'P'
    [0b01110, 0b10001, 0b10001, 0b10001, 0b10101, 0b10010, 0b01101, 0b00000], // 'Q'
    [0b11110, 0b10001, 0b10001, 0b11110, 0b10100, 0b10010, 0b10001, 0b00000], // 'R'
    [0b01111, 0b10000, 0b10000, 0b01110, 0b00001, 0b00001, 0b11110, 0b00000], // 'S'
    [0b11111, 0b00100, 0b00100, 0b00100, 0b00100, 0b00100, 0b00100, 0b00000], // 'T'
    [0b10001, 0b10001, 0b10001, 0b10001, 0b10001, 0b10001, 0b01110, 0b00000], // 'U'
    [0b10001, 0b10001, 0b10001, 0b10001, 0b10001, 0b01010, 0b00100, 0b00000], // 'V'
    [0b10001, 0b10001, 0b10001, 0b10101, 0b10101, 0b10101, 0b01010, 0b00000], // 'W'
    [0b10001, 0b10001, 0b01010, 0b00100, 0b01010, 0b10001, 0b10001, 0b00000], // 'X'
    [0b10001, 0b10001, 0b01010, 0b00100, 0b00100, 0b00100, 0b00100, 0b00000], // 'Y'
    [0b11111, 0b00001, 0b00010, 0b00100, 0b01000, 0b10000, 0b11111, 0b00000], // 'Z'
    [0b01110, 0b01000, 0b01000, 0b01000, 0b01000, 0b01000, 0b01110, 0b00000], // '['
    [0b00000, 0b10000, 0b01000, 0b00100, 0b00010, 0b00001, 0b00000, 0b00000], // '\\'
    [0b01110, 0b00010, 0b00010, 0b00010, 0b00010, 0b00010, 0b01110, 0b00000], // ']'
    [0b00100, 0b01010, 0b10001, 0b00000, 0b00000, 0b00000, 0b00000, 0b00000], // '^'
    [0b00000, 0b00000, 0b00000, 0b00000, 0b00000, 0b00000, 0b00000, 0b11111], // '_'
    [0b01000, 0b00100, 0b00010, 0b00000, 0b00000, 0b00000, 0b00000, 0b00000], // '`'
    [0b00000, 0b00000, 0b01110, 0b00001, 0b01111, 0b10001, 0b01111, 0b00000], // 'a'
    [0b10000, 0b10000, 0b10110, 0b11001, 0b10001, 0b10001, 0b11110, 0b00000], // 'b'
    [0b00000, 0b00000, 0b01110, 0b10000, 0b10000, 0b10001, 0b01110, 0b00000], // 'c'
    [0b00001, 0b00001, 0b01101, 0b10011, 0b10001, 0b10001, 0b01111, 0b00000], // 'd'
    [0b00000, 0b00000, 0b01110, 0b10001, 0b11111, 0b10000, 0b01110, 0b00000], // 'e'
    [0b00110, 0b01001, 0b01000, 0b11100, 0b01000, 0b01000, 0b01000, 0b00000], // 'f'
    [0b00000, 0b00000, 0b01111, 0b10001, 0b10001, 0b01111, 0b00001, 0b01110], // 'g'
    [0b10000, 0b10000, 0b10110, 0b11001, 0b10001, 0b10001, 0b10001, 0b00000], // 'h'
    [0b00100, 0b00000, 0b01100, 0b00100, 0b00100, 0b00100, 0b01110, 0b00000], // 'i'
    [0b00010, 0b00000, 0b00110, 0b00010, 0b00010, 0b00010, 0b10010, 0b01100], // 'j'
    [0b10000, 0b10000, 0b10010, 0b10100, 0b11000, 0b10100, 0b10010, 0b00000], // 'k'
    [0b01100, 0b00100, 0b00100, 0b00100, 0b00100, 0b00100, 0b01110, 0b00000], // 'l'
    [0b00000, 0b00000, 0b11010, 0b10101, 0b10101, 0b10001, 0b10001, 0b00000], // 'm'
    [0b00000, 0b00000, 0b10110, 0b11001, 0b10001, 0b10001, 0b10001, 0b00000], // 'n'
    [0b00000, 0b00000, 0b01110, 0b10001, 0b10001, 0b10001, 0b01110, 0b00000], // 'o'
    [0b00000, 0b00000, 0b11110, 0b10001, 0b10001, 0b11110, 0b10000, 0b10000], // 'p'
    [0b00000, 0b00000, 0b01111, 0b10001, 0b10001, 0b01111, 0b00001, 0b00001], // 'q'
    [0b00000, 0b00000, 0b10110, 0b11001, 0b10000, 0b10000, 0b10000, 0b00000], // 'r'
    [0b00000, 0b00000, 0b01111, 0b10000, 0b01110, 0b00001, 0b11110, 0b00000], // 's'
    [0b01000, 0b01000, 0b11100, 0b01000, 0b01000, 0b01001, 0b00110, 0b00000], // 't'
    [0b00000, 0b00000, 0b10001, 0b10001, 0b10001, 0b10011, 0b01101, 0b00000], // 'u'
    [0b00000, 0b00000, 0b10001, 0b10001, 0b10001, 0b01010, 0b00100, 0b00000], // 'v'
    [0b00000, 0b00000, 0b10001, 0b10001, 0b10101, 0b10101, 0b01010, 0b00000], // 'w'
    [0b00000, 0b00000, 0b10001, 0b01010, 0b00100, 0b01010, 0b10001, 0b00000], // 'x'
    [0b00000, 0b00000, 0b10001, 0b10001, 0b10001, 0b01111, 0b00001, 0b01110], // 'y'
    [0b00000, 0b00000, 0b11111, 0b00010, 0b00100, 0b01000, 0b11111, 0b00000], // 'z'
    [0b00011, 0b00100, 0b00100, 0b01000, 0b00100, 0b00100, 0b00011, 0b00000], // '{'
    [0b00100, 0b00100, 0b00100, 0b00100, 0b00100, 0b00100, 0b00100, 0b00000], // '|'
    [0b11000, 0b00100, 0b00100, 0b00010, 0b00100, 0b00100, 0b11000, 0b00000], // '}'
    [0b00000, 0b00000, 0b01000, 0b10101, 0b00010, 0b00000, 0b00000, 0b00000], // '~'
];

#[cfg(test)]
mod tests {
    use super::*;

    /// The glyph of `ch` as drawn on a canvas, as '#'/'.' rows.
    fn drawn(ch: char) -> Vec<String> {
        let mut c = Canvas::new(GLYPH_W, 8, WHITE);
        c.text(0, 0, &ch.to_string(), 1, BLACK);
        (0..8).map(|y| (0..GLYPH_W).map(|x| if c.get(x, y) == BLACK { '#' } else { '.' }).collect()).collect()
    }

    #[test]
    fn font_draws_known_glyphs() {
        assert_eq!(drawn('A'), [".###.", "#...#", "#...#", "#####", "#...#", "#...#", "#...#", "....."]);
        assert_eq!(drawn('g')[7], ".###.", "descender row");
        assert!(drawn(' ').iter().all(|r| r == "....."));
        assert_eq!(drawn('\u{e9}'), drawn('?'), "non-ASCII falls back to '?'");
        // Every printable glyph but the space has ink, and no two glyphs are the same.
        let name = |i: usize| (i + 32) as u8 as char;
        for (i, g) in FONT.iter().enumerate().skip(1) {
            assert!(g.iter().any(|&r| r != 0), "glyph {:?} is empty", name(i));
            assert!(g.iter().all(|&r| r < 32), "glyph {:?} wider than 5", name(i));
            if let Some(j) = FONT[..i].iter().position(|h| h == g) {
                panic!("{:?} is drawn like {:?}", name(i), name(j));
            }
        }
    }

    #[test]
    fn text_scales_and_measures() {
        let mut c = Canvas::new(40, 20, WHITE);
        let w = c.text(1, 2, "I", 2, BLACK);
        assert_eq!(w, 10);
        assert_eq!(text_width("ab", 1), 11);
        // 'I' top row is .###. -> at scale 2, columns 1+2..1+8 of rows 2..4 are ink.
        assert_eq!(c.get(3, 2), BLACK);
        assert_eq!(c.get(8, 3), BLACK);
        assert_eq!(c.get(1, 2), WHITE);
        assert_eq!(c.get(9, 2), WHITE);
    }

    #[test]
    fn shapes_are_clipped_and_filled() {
        let mut c = Canvas::new(10, 10, WHITE);
        c.rect(-5, -5, 2, 2, BLACK);
        assert_eq!(c.get(0, 0), BLACK);
        assert_eq!(c.get(3, 3), WHITE);
        c.line((0.0, 9.0), (9.0, 9.0), 1, BLACK);
        assert!((0..10).all(|x| c.get(x, 9) == BLACK));
        let mut d = Canvas::new(21, 3, WHITE);
        d.dashed_hline(0, 20, 1, (4, 3), 1, BLACK);
        let row: String = (0..21).map(|x| if d.get(x, 1) == BLACK { '#' } else { '.' }).collect();
        assert_eq!(row, "####...####...####...");
        for shape in [Marker::Circle, Marker::Square, Marker::Diamond, Marker::TriangleUp] {
            let mut m = Canvas::new(11, 11, WHITE);
            m.marker(5.0, 5.0, 4, shape, BLACK);
            assert_eq!(m.get(5, 5), BLACK, "{shape:?} centre");
            assert_eq!(m.get(0, 0), WHITE, "{shape:?} corner");
        }
    }
}
