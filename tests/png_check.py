"""Validate a PNG written by `ccv1d bench --plot` with Python's zlib and struct only.

usage: python3 tests/png_check.py FILE.png [RAW_OUT]
Checks the signature, every chunk's CRC, IHDR (8-bit RGB, no interlace), IHDR + IDAT.. + IEND
order, the zlib stream (zlib.decompress checks its Adler-32), the decoded size and that every
row uses filter type 0 (the only one the encoder writes). Prints "WIDTH HEIGHT COLOURS" (the
number of distinct colours); with RAW_OUT, writes the RGB pixels there. Exit status 1 on any defect.
"""
import struct
import sys
import zlib


def main():
    data = open(sys.argv[1], "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        sys.exit("bad signature")
    chunks, pos = [], 8
    while pos < len(data):
        (n,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + n]
        (crc,) = struct.unpack(">I", data[pos + 8 + n:pos + 12 + n])
        if zlib.crc32(kind + body) != crc:
            sys.exit(f"bad CRC in {kind!r} at byte {pos}")
        chunks.append((kind, body))
        pos += 12 + n
    if pos != len(data):
        sys.exit("truncated chunk")
    kinds = [k for k, _ in chunks]
    if len(kinds) < 3 or kinds[0] != b"IHDR" or kinds[-1] != b"IEND" or any(k != b"IDAT" for k in kinds[1:-1]):
        sys.exit(f"chunk order {kinds}")
    if len(chunks[0][1]) != 13 or chunks[-1][1]:
        sys.exit("IHDR or IEND size")
    w, h, depth, colour, comp, filt, interlace = struct.unpack(">IIBBBBB", chunks[0][1])
    if (depth, colour, comp, filt, interlace) != (8, 2, 0, 0, 0) or w == 0 or h == 0:
        sys.exit(f"IHDR {w}x{h} depth {depth} colour {colour} {comp} {filt} {interlace}")
    raw = zlib.decompress(b"".join(b for k, b in chunks if k == b"IDAT"))
    stride = 1 + 3 * w
    if len(raw) != h * stride:
        sys.exit(f"decoded {len(raw)} bytes, expected {h * stride}")
    if any(raw[y * stride] != 0 for y in range(h)):
        sys.exit("a row with a filter type other than 0")
    pixels = b"".join(raw[y * stride + 1:(y + 1) * stride] for y in range(h))
    colours = len({pixels[i:i + 3] for i in range(0, len(pixels), 3)})
    print(w, h, colours)
    if len(sys.argv) > 2:
        open(sys.argv[2], "wb").write(pixels)


main()
