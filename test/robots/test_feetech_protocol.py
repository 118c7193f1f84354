"""Feetech SCS/STS protocol: byte vectors worked out by hand, validation, the stream parser."""

import math

import pytest

from lang2policy.robots.feetech.protocol import (
    Address,
    ErrorBit,
    Instruction,
    InstructionPacket,
    InstructionParser,
    ProtocolError,
    StatusPacket,
    StatusParser,
    checksum,
    decode_instruction,
    decode_signed,
    decode_status,
    decode_sync_read,
    decode_sync_write,
    encode_signed,
    encode_status,
    encode_u16,
    error_names,
    ping_packet,
    radians_to_ticks,
    read_packet,
    sync_read_packet,
    sync_write_packet,
    ticks_to_radians,
    write_packet,
)

pytestmark = pytest.mark.timeout(10)


def hexbytes(text: str) -> bytes:
    return bytes.fromhex(text)


# Checksums below: ~(sum of ID, LEN, CODE, PARAMS) & 0xFF, summed by hand.
def test_ping_id_1():
    # 01 + 02 + 01 = 0x04 -> ~0x04 = 0xFB
    assert ping_packet(1) == hexbytes("FF FF 01 02 01 FB")


def test_read_present_position():
    # READ id 1, address 56 (0x38), 2 bytes: 01 + 04 + 02 + 38 + 02 = 0x41 -> 0xBE
    assert read_packet(1, Address.PRESENT_POSITION, 2) == hexbytes("FF FF 01 04 02 38 02 BE")


def test_write_goal_position_little_endian():
    # WRITE id 1, address 42 (0x2A), 2048 = 00 08: 01 + 05 + 03 + 2A + 00 + 08 = 0x3B -> 0xC4
    packet = write_packet(1, Address.GOAL_POSITION, encode_u16(2048))
    assert packet == hexbytes("FF FF 01 05 03 2A 00 08 C4")


def test_sync_read_six_servos():
    # FE + 0A + 82 + 38 + 02 + (1+2+3+4+5+6) = 473 = 0x1D9 -> low byte D9 -> 0x26
    packet = sync_read_packet(Address.PRESENT_POSITION, 2, [1, 2, 3, 4, 5, 6])
    assert packet == hexbytes("FF FF FE 0A 82 38 02 01 02 03 04 05 06 26")


def test_sync_write_two_goals():
    # FE + 0A + 83 + 2A + 02 + (01 00 08) + (02 00 04) = 454 = 0x1C6 -> C6 -> 0x39
    packet = sync_write_packet(Address.GOAL_POSITION, {1: encode_u16(2048), 2: encode_u16(1024)})
    assert packet == hexbytes("FF FF FE 0A 83 2A 02 01 00 08 02 00 04 39")


def test_status_packet_vector_and_round_trip():
    # id 1, no error, data 00 08: 01 + 04 + 00 + 00 + 08 = 0x0D -> 0xF2
    raw = encode_status(1, 0, encode_u16(2048))
    assert raw == hexbytes("FF FF 01 04 00 00 08 F2")
    assert decode_status(raw) == StatusPacket(1, 0, b"\x00\x08")


def test_instruction_round_trips():
    assert decode_instruction(ping_packet(7)) == InstructionPacket(7, Instruction.PING, b"")
    read = decode_instruction(read_packet(3, 56, 11))
    assert read == InstructionPacket(3, Instruction.READ, bytes([56, 11]))
    sync_read = decode_instruction(sync_read_packet(56, 2, [3, 1]))
    assert decode_sync_read(sync_read.params) == (56, 2, (3, 1))
    goals = {1: b"\x00\x08", 6: b"\xff\x0f"}
    sync_write = decode_instruction(sync_write_packet(42, goals))
    assert sync_write.servo_id == 0xFE
    assert decode_sync_write(sync_write.params) == (42, goals)


def test_checksum_matches_definition():
    body = bytes([1, 4, 0, 0, 8])
    assert checksum(body) == (~sum(body)) & 0xFF == 0xF2


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (hexbytes("FF FE 01 02 01 FB"), "bad header"),
        (hexbytes("FF FF 01 02 01"), "too short"),
        (hexbytes("FF FF 01 03 01 FB"), "length byte says 3"),
        (hexbytes("FF FF 01 02 01 FA"), "bad checksum 0xfa, expected 0xfb"),
    ],
)
def test_decode_errors_say_what_was_wrong(raw, message):
    with pytest.raises(ProtocolError, match=message):
        decode_status(raw)


def test_encoders_validate_ranges():
    with pytest.raises(ProtocolError, match="id 255"):
        ping_packet(255)
    with pytest.raises(ProtocolError, match="address 256"):
        read_packet(1, 256, 2)
    with pytest.raises(ProtocolError, match="duplicate"):
        sync_read_packet(56, 2, [1, 1])
    with pytest.raises(ProtocolError, match="equal non-empty"):
        sync_write_packet(42, {1: b"\x00\x08", 2: b"\x00"})
    with pytest.raises(ProtocolError, match="no servo ids"):
        sync_read_packet(56, 2, [])
    with pytest.raises(ProtocolError, match="out of range"):
        encode_u16(70000)


def test_sign_magnitude_registers():
    # speed -100 ticks/s: 100 | bit 15 = 0x8064 -> 64 80 (little endian)
    assert encode_signed(-100, 15) == hexbytes("64 80")
    assert decode_signed(hexbytes("64 80"), 15) == -100
    # load -50 %: 500 | bit 10 = 0x05F4 -> F4 05
    assert encode_signed(-500, 10) == hexbytes("F4 05")
    assert decode_signed(hexbytes("F4 05"), 10) == -500
    assert decode_signed(hexbytes("00 08"), 15) == 2048


def test_error_names():
    assert error_names(0) == ()
    assert error_names(ErrorBit.OVERHEAT | ErrorBit.VOLTAGE) == ("voltage", "overheat")
    assert error_names(0x40) == ("bit6",)


def test_ticks_and_radians():
    assert ticks_to_radians(2048) == 0.0
    assert ticks_to_radians(3072) == pytest.approx(math.pi / 2)
    assert radians_to_ticks(-math.pi / 2) == 1024
    assert radians_to_ticks(10.0) == 4095


def status(servo_id: int, data: bytes = b"") -> bytes:
    return encode_status(servo_id, 0, data)


def test_parser_skips_garbage_and_waits_for_partial_packets():
    parser = StatusParser()
    stream = b"\x00\x13\xfe" + status(1, b"\x00\x08") + b"\x55" + status(2, b"\x00\x04")
    found = []
    for byte in stream:  # one byte at a time: every packet is partial for a while
        found += parser.feed(bytes([byte]))
    assert [(p.servo_id, p.params) for p in found] == [(1, b"\x00\x08"), (2, b"\x00\x04")]
    assert parser.skipped_bytes == 4
    assert parser.corrupt == 0
    assert parser.pending == 0


def test_parser_recovers_a_good_packet_after_a_corrupt_one():
    bad = bytearray(status(3, b"\x10\x00"))
    bad[5] ^= 0x01  # a data bit flipped: the checksum no longer matches
    parser = StatusParser()
    found = parser.feed(bytes(bad) + status(4, b"\x20\x00"))
    assert [p.servo_id for p in found] == [4]
    assert parser.bad_checksum == 1


def test_parser_handles_runs_of_ff_and_impossible_lengths():
    parser = StatusParser(max_params=2)
    too_long = hexbytes("FF FF 01 09 00")  # 7 parameter bytes where at most 2 are expected
    found = parser.feed(b"\xff\xff\xff" + status(5) + too_long + status(6, b"\x01\x02"))
    assert [p.servo_id for p in found] == [5, 6]
    assert parser.bad_length == 1


def test_parser_keeps_a_trailing_header_byte():
    parser = StatusParser()
    raw = status(1)
    assert parser.feed(b"\x00\x00" + raw[:1]) == []
    assert [p.servo_id for p in parser.feed(raw[1:])] == [1]


def test_instruction_parser():
    parser = InstructionParser()
    found = parser.feed(b"\x01" + ping_packet(1) + sync_read_packet(56, 2, [1, 2]))
    assert [p.instruction for p in found] == [Instruction.PING, Instruction.SYNC_READ]
