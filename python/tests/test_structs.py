"""The ctypes mirrors against include/causal_conv1d.h: every field's name, order and offset and
every struct's size (from a C program compiled with `cc`), and every #define'd constant."""
import ctypes as C
import os
import re
import shutil
import subprocess
import tempfile
import unittest

from _common import HEADER, require

import ccv1d._lib as L

STRUCTS = {cls.__name__: cls for cls in L.STRUCTS}


def header_text():
    require(os.path.exists(HEADER), f"the C header ({HEADER})")
    with open(HEADER) as f:
        return f.read()


def header_fields(text):
    """{struct name: [field names in order]} parsed from the typedef'd structs."""
    out = {}
    for name, body in re.findall(r"typedef struct (\w+) \{(.*?)\} \1;", text, re.S):
        body = re.sub(r"//[^\n]*", "", body)
        out[name] = [re.search(r"(\w+)\s*(\[\s*\d+\s*\])?\s*$", decl.strip()).group(1)
                     for decl in body.split(";") if decl.strip()]
    return out


class HeaderLayout(unittest.TestCase):
    def test_field_names_and_order(self):
        fields = header_fields(header_text())
        self.assertEqual(set(fields), set(STRUCTS), "structs in the header vs ctypes mirrors")
        for name, cls in STRUCTS.items():
            self.assertEqual([f[0] for f in cls._fields_], fields[name], name)

    def test_offsets_and_sizes_match_the_c_compiler(self):
        text = header_text()
        cc = shutil.which(os.environ.get("CC", "cc"))
        require(cc, "a C compiler (cc)")
        fields = header_fields(text)
        lines = []
        for name, names in fields.items():
            lines.append(f'printf("{name} sizeof %zu\\n", sizeof({name}));')
            for f in names:
                lines.append(f'printf("{name} {f} %zu\\n", offsetof({name}, {f}));')
        src = "#include <stdio.h>\n#include <stddef.h>\n#include \"causal_conv1d.h\"\nint main(void) {\n" + \
              "\n".join(lines) + "\nreturn 0;\n}\n"
        with tempfile.TemporaryDirectory() as tmp:
            with open(os.path.join(tmp, "layout.c"), "w") as f:
                f.write(src)
            exe = os.path.join(tmp, "layout")
            subprocess.run([cc, "-std=c11", "-I", os.path.dirname(HEADER), os.path.join(tmp, "layout.c"), "-o", exe],
                           check=True)
            got = subprocess.run([exe], check=True, capture_output=True, text=True).stdout.split("\n")
        checked = 0
        for line in filter(None, got):
            parts = line.split()
            cls = STRUCTS[parts[0]]
            want = int(parts[-1])
            if parts[1] == "sizeof":
                self.assertEqual(C.sizeof(cls), want, f"sizeof({parts[0]})")
            else:
                self.assertEqual(getattr(cls, parts[1]).offset, want, f"offsetof({parts[0]}, {parts[1]})")
            checked += 1
        self.assertEqual(checked, sum(len(v) + 1 for v in fields.values()))
        self.assertGreater(checked, 60)

    def test_constants(self):
        defines = dict((k, int(v)) for k, v in re.findall(r"#define (CCV1D_\w+) (-?\d+)", header_text()))
        statuses = {k[len("CCV1D_ERR_"):]: v for k, v in defines.items() if k.startswith("CCV1D_ERR_")}
        statuses["OK"] = defines["CCV1D_OK"]
        self.assertEqual(statuses, L.STATUS)
        for prefix in ("DTYPE_", "ACT_", "BACKEND_", "HAVE_"):
            for k, v in defines.items():
                if k.startswith("CCV1D_" + prefix):
                    self.assertEqual(getattr(L, k[len("CCV1D_"):]), v, k)

    def test_status_names_match_the_library(self):
        for name, code in L.STATUS.items():
            self.assertEqual(L.status_string(code), name)
        self.assertEqual(L.status_string(12345), "UNKNOWN_STATUS")


class StructSizeIsChecked(unittest.TestCase):
    def test_library_rejects_a_wrong_struct_size(self):
        p = L.new_params(L.ccv1d_fwd_params)
        self.assertEqual(p.struct_size, C.sizeof(L.ccv1d_fwd_params))
        p.struct_size -= 8
        with self.assertRaises(L.Ccv1dError) as e:
            L.call("ccv1d_fwd", p)
        self.assertEqual(e.exception.status_name, "STRUCT_SIZE")
        self.assertIn("struct_size", e.exception.message)


if __name__ == "__main__":
    unittest.main()
