# Hashes, HMAC, tokens, UUIDs and binary encodings.
import base64
import binascii
import hashlib
import hmac
import secrets
import struct
import uuid

assert hashlib.sha256(b"abc").hexdigest() == (
    "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
)
assert hashlib.md5(b"abc").hexdigest() == "900150983cd24fb0d6963f7d28e17f72"
assert hashlib.sha1(b"abc").hexdigest() == "a9993e364706816aba3e25717850c26c9cd0d89d"
assert len(hashlib.blake2b(b"x", digest_size=16).digest()) == 16
assert hashlib.sha3_256(b"").hexdigest().startswith("a7ffc6f8bf1ed766")
h = hashlib.new("sha512")
for chunk in (b"a" * 1000 for _ in range(100)):
    h.update(chunk)
assert h.hexdigest() == hashlib.sha512(b"a" * 100_000).hexdigest()
assert "sha256" in hashlib.algorithms_available
key = hashlib.pbkdf2_hmac("sha256", b"password", b"salt", 1000)
assert key.hex().startswith("632c2812e46d4604102ba7618e9d6d7d")
assert hashlib.scrypt(b"pw", salt=b"s", n=16, r=8, p=1, dklen=16) == hashlib.scrypt(
    b"pw", salt=b"s", n=16, r=8, p=1, dklen=16
)
sig = hmac.new(b"key", b"The quick brown fox jumps over the lazy dog", hashlib.sha256).hexdigest()
assert sig == "f7bc83f430538424b13298e6aa6fb143ef4d59a14946175997479dbc2d1a3cd8"
assert hmac.compare_digest(sig, sig)

tok = secrets.token_hex(16)
assert len(tok) == 32 and secrets.token_hex(16) != tok
assert len(secrets.token_urlsafe(32)) >= 32 and 0 <= secrets.randbelow(10) < 10
u = uuid.uuid4()
assert u.version == 4 and uuid.UUID(str(u)) == u
assert uuid.uuid5(uuid.NAMESPACE_DNS, "python.org") == uuid.UUID("886313e1-3b8a-5372-9b90-0c9aee199e5d")
assert uuid.uuid1().version == 1

raw = bytes(range(256))
assert base64.b64decode(base64.b64encode(raw)) == raw
assert base64.urlsafe_b64encode(b"\xfb\xff") == b"-_8="
assert base64.b32encode(b"hi") == b"NBUQ===="
assert binascii.hexlify(b"\x01\xab") == b"01ab" and bytes.fromhex("01ab") == b"\x01\xab"
packed = struct.pack("<IhdQ", 7, -2, 3.5, 2**40)
assert struct.unpack("<IhdQ", packed) == (7, -2, 3.5, 2**40) and struct.calcsize("<IhdQ") == 22
assert int.from_bytes(b"\x00\x01", "big") == 1 and (258).to_bytes(2, "little") == b"\x02\x01"
print("OK hashing_encoding")
