"""Reading what is left of a damaged MCAP: whole messages kept, in order, the loss counted."""

import pytest
from mcap.writer import CompressionType, Writer

from sim2real.core.bag_salvage import salvage_bag


def _mcap(path, compression, messages=200, chunk_size=2000):
    with open(path, "wb") as handle:
        writer = Writer(handle, chunk_size=chunk_size, compression=compression)
        writer.start()
        schema = writer.register_schema("std_msgs/msg/String", "ros2msg", b"string data")
        channels = {t: writer.register_channel(t, "cdr", schema) for t in ("/a", "/b")}
        for k in range(messages):
            topic = "/a" if k % 2 == 0 else "/b"
            writer.add_message(channels[topic], log_time=k, data=k.to_bytes(4, "little") * 8, publish_time=k)
        writer.finish()
    return path.read_bytes()


@pytest.mark.parametrize("compression", [CompressionType.NONE, CompressionType.ZSTD, CompressionType.LZ4])
def test_a_truncated_file_gives_back_its_whole_messages_in_order(tmp_path, compression):
    path = tmp_path / "bag.mcap"
    data = _mcap(path, compression)
    whole = salvage_bag(path)
    assert [m[2] for m in whole.messages] == list(range(200)) and whole.damage == ""
    for cut in (len(data) // 3, len(data) // 2, len(data) - 100):
        path.write_bytes(data[:cut])
        part = salvage_bag(path)
        stamps = [m[2] for m in part.messages]
        assert stamps == list(range(len(stamps)))  # a prefix, none invented or reordered
        assert part.messages == whole.messages[: len(stamps)]
        assert "cut short" in part.damage
        if compression == CompressionType.NONE:
            assert len(stamps) > cut / len(data) * 200 - 30  # an uncompressed chunk is read up to the cut
    path.write_bytes(data[:cut])
    assert {m[0] for m in salvage_bag(path, ["/b"]).messages} == {"/b"}


def test_the_loss_is_counted_from_the_bags_metadata(tmp_path):
    bag = tmp_path / "bag"
    bag.mkdir()
    data = _mcap(bag / "bag_0.mcap", CompressionType.NONE)
    (bag / "metadata.yaml").write_text(
        "rosbag2_bagfile_information:\n  topics_with_message_count:\n"
        "  - {message_count: 100, topic_metadata: {name: /a}}\n  - {message_count: 100, topic_metadata: {name: /b}}\n"
    )
    (bag / "bag_0.mcap").write_bytes(data[: len(data) // 2])
    part = salvage_bag(bag)
    read = part.counts()
    assert "messages lost (/a" in part.summary()
    assert f"{200 - sum(read.values())} of 200 messages lost" in part.summary()


@pytest.mark.parametrize("compression", [CompressionType.NONE, CompressionType.ZSTD])
def test_every_cut_and_a_corrupt_chunk_are_damage_never_an_exception(tmp_path, compression):
    path = tmp_path / "bag.mcap"
    data = _mcap(path, compression, messages=40, chunk_size=400)
    for cut in range(8, len(data), 7):  # through every header, string and record boundary
        path.write_bytes(data[:cut])
        salvage_bag(path)
    corrupt = bytearray(data)
    corrupt[100:140] = b"\xff" * 40  # inside the first chunk's records
    path.write_bytes(bytes(corrupt))
    damaged = salvage_bag(path)
    if compression == CompressionType.ZSTD:  # the corrupt chunk does not decompress: named as damage
        assert "unreadable record" in damaged.damage


def test_a_folder_without_mcap_and_a_file_that_is_no_mcap_are_named(tmp_path):
    with pytest.raises(ValueError, match="holds no .mcap"):
        salvage_bag(tmp_path)
    (tmp_path / "x.mcap").write_bytes(b"not an mcap file")
    assert "not an MCAP file" in salvage_bag(tmp_path).damage
