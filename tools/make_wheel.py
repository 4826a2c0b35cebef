"""Builds the tf_rnn_ops wheel (a zip with the package, the op library and dist-info).

Called by the Bazel target //:wheel; written without setuptools so that it works offline.
"""
import argparse
import base64
import hashlib
import os
import zipfile

NAME, VERSION = "tf_rnn_ops", "0.1.0"


def _record_line(arcname, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{arcname},sha256={digest},{len(data)}"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--so", required=True, action="append", nargs="+")
    p.add_argument("--build-info", required=True)
    p.add_argument("--tf-version", required=True)
    p.add_argument("py", nargs="+")
    args = p.parse_args()

    files = {f"{NAME}/{os.path.basename(f)}": open(f, "rb").read() for f in args.py}
    for group in args.so:
        for so in group:
            files[f"{NAME}/{os.path.basename(so)}"] = open(so, "rb").read()
    files[f"{NAME}/_build_info.txt"] = open(args.build_info, "rb").read()
    major_minor = ".".join(args.tf_version.split(".")[:2])
    dist = f"{NAME}-{VERSION}.dist-info"
    files[f"{dist}/METADATA"] = (
        "Metadata-Version: 2.1\n"
        f"Name: {NAME}\nVersion: {VERSION}\n"
        "Summary: TensorFlow RNN raw ops (LSTM block ops, ...) as a custom-op library\n"
        f"Requires-Python: >=3.9\n"
        f"Description: Built against TensorFlow {args.tf_version}; needs TensorFlow "
        f"{major_minor}.x (tensorflow or tensorflow-cpu) installed.\n"
    ).encode()
    files[f"{dist}/WHEEL"] = (
        "Wheel-Version: 1.0\nGenerator: tf_rnn_ops make_wheel.py\nRoot-Is-Purelib: false\n"
        "Tag: py3-none-linux_x86_64\n"
    ).encode()
    record = [_record_line(k, v) for k, v in sorted(files.items())]
    record.append(f"{dist}/RECORD,,")
    files[f"{dist}/RECORD"] = ("\n".join(record) + "\n").encode()

    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with zipfile.ZipFile(args.out, "w", zipfile.ZIP_DEFLATED) as z:
        for k in sorted(files):
            z.writestr(k, files[k])


if __name__ == "__main__":
    main()
