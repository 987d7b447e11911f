"""The Go2's DDS topics through cyclonedds: one participant, a reader and a writer.

The bridge reads ``rt/lowstate`` and writes ``rt/lowcmd``; a robot (or the Go2 double) the
other way round. Plain DDS with Unitree's types: no ROS, so its own domain and network
interface.
"""

from __future__ import annotations

from typing import Any, Optional

from cyclonedds._clayer import ddspy_take, ddspy_write
from cyclonedds.builtin import BuiltinDataReader, BuiltinTopicDcpsPublication
from cyclonedds.core import DDSException, InstanceState, Policy, Qos, ReadCondition, SampleState, ViewState, WaitSet
from cyclonedds.domain import Domain, DomainParticipant
from cyclonedds.pub import DataWriter
from cyclonedds.sub import DataReader
from cyclonedds.topic import Topic
from cyclonedds.util import duration

from sim2real.core.unitree.frames import LowCmdFrame, lowstate_values
from sim2real.core.unitree.messages import LowCmd_, LowState_

LOWSTATE_TOPIC = "rt/lowstate"
LOWCMD_TOPIC = "rt/lowcmd"
# Samples kept between two takes: a reader that falls behind loses the oldest, never blocks the robot.
READER_DEPTH = 32


_domains: dict[int, tuple[str, Domain]] = {}  # a process configures a DDS domain once


def _configure(domain: int, interface: str) -> None:
    config = interface_config(interface)
    if domain in _domains:
        if _domains[domain][0] != config:
            raise ValueError(
                f"DDS domain {domain} is already bound to interface {_domains[domain][0]!r} in this "
                f"process; use one network_interface per domain"
            )
        return
    if config:
        _domains[domain] = (config, Domain(domain, config))


def interface_config(interface: str) -> str:
    """cyclonedds XML that binds a participant to one network interface ('' = cyclonedds' choice)."""
    if not interface:
        return ""
    return (
        '<CycloneDDS><Domain id="any"><General><Interfaces>'
        f'<NetworkInterface name="{interface}"/></Interfaces></General></Domain></CycloneDDS>'
    )


class UnitreeDds:
    """``role`` ``bridge``: reads LowState, writes LowCmd; ``robot``: reads LowCmd, writes LowState."""

    # None once closed (close() drops the entities); no method is called after that.
    participant: Optional[DomainParticipant]
    reader: Optional[DataReader[Any]]  # LowState_ or LowCmd_, by role
    writer: Optional[DataWriter[Any]]
    _waitset: Optional[WaitSet]
    _condition: Optional[ReadCondition]
    _publications: Optional[BuiltinDataReader]
    _alive: Optional[ReadCondition]

    def __init__(self, domain: int, interface: str = "", role: str = "bridge"):
        if role not in ("bridge", "robot"):
            raise ValueError(f"role {role!r}: use bridge or robot")
        _configure(domain, interface)
        self.participant = DomainParticipant(domain)
        state = Topic(self.participant, LOWSTATE_TOPIC, LowState_)
        command = Topic(self.participant, LOWCMD_TOPIC, LowCmd_)
        reads, writes = (state, command) if role == "bridge" else (command, state)
        self._read_topic = LOWSTATE_TOPIC if role == "bridge" else LOWCMD_TOPIC
        self._read_type = LowState_ if role == "bridge" else LowCmd_
        self.reader = DataReader(self.participant, reads, qos=Qos(Policy.History.KeepLast(READER_DEPTH)))
        self.writer = DataWriter(self.participant, writes)
        self._waitset = WaitSet(self.participant)
        self._condition = ReadCondition(self.reader, ViewState.Any | InstanceState.Any | SampleState.NotRead)
        self._waitset.attach(self._condition)
        self._publications = BuiltinDataReader(self.participant, BuiltinTopicDcpsPublication)
        self._alive = ReadCondition(self._publications, ViewState.Any | InstanceState.Alive | SampleState.Any)

    def take(self, timeout: float) -> list:
        """The samples received since the last take (LowState_ or LowCmd_, by role), waiting up
        to ``timeout`` s for the first."""
        return [self._read_type.deserialize(data) for data in self.take_payloads(timeout)]

    take_states = take  # the bridge's name for it
    take_commands = take  # the robot's

    def take_state_values(self, timeout: float) -> list[tuple]:
        """As :meth:`take_states`, each LowState as its flat field values
        (:func:`~sim2real.core.unitree.frames.lowstate_values`): the bridge's 500 Hz path, which
        skips building a LowState_ of 20 motor objects per sample."""
        return [lowstate_values(data) for data in self.take_payloads(timeout)]

    def take_payloads(self, timeout: float) -> list[bytes]:
        """As :meth:`take`, each sample as its DDS payload (header included), through cyclonedds'
        own take call (what ``DataReader.take`` wraps, before it deserializes)."""
        assert self.reader is not None and self._waitset is not None, "take_payloads() after close()"
        payloads = self._take_payloads()
        if not payloads and timeout > 0:
            self._waitset.wait(duration(seconds=timeout))
            payloads = self._take_payloads()
        return payloads

    def _take_payloads(self) -> list[bytes]:
        assert self.reader is not None
        # A writer that left (a robot switched off, sport mode released) sends a sample without
        # data (DataReader.take's InvalidSample): dropped here.
        taken = ddspy_take(self.reader._ref, SampleState.Any | ViewState.Any | InstanceState.Any, READER_DEPTH)
        if isinstance(taken, int):
            raise DDSException(taken, f"taking {self._read_topic}")
        return [data for data, info in taken if info.valid_data]

    def write(self, sample) -> None:
        assert self.writer is not None, "write() after close()"
        self.writer.write(sample)

    def write_frame(self, frame: LowCmdFrame) -> None:
        """Write a sealed frame's payload as it is (what ``DataWriter.write`` does after it
        serializes): the bridge resends one frame 500 times a second."""
        assert self.writer is not None, "write_frame() after close()"
        code = ddspy_write(self.writer._ref, frame.payload)
        if code < 0:
            raise DDSException(code, f"writing a frame on {LOWCMD_TOPIC}")

    def other_command_writers(self) -> list[str]:
        """Writers on rt/lowcmd other than this participant's (DDS discovery): e.g. the robot's
        sport mode, which would fight every command the bridge sends."""
        return self.rivals()[0]

    def other_state_writers(self) -> list[str]:
        """The participants writing rt/lowstate, this one aside: for the bridge every robot on the
        domain and interface. More than one (two robots, or a robot and a simulator) interleave
        their states, and the bridge would command one robot from the other's. Counted by
        participant, so a robot whose service writes with more than one writer is still one."""
        return self.rivals()[1]

    def rivals(self) -> tuple[list[str], list[str]]:
        """Both of the above from one read of the discovered publications."""
        assert self.participant is not None and self._publications is not None and self._alive is not None, (
            "writers asked after close()"
        )
        own = str(self.participant.guid)
        command_writers: set[str] = set()
        state_participants: set[str] = set()
        seen, batch = 0, 256
        while True:  # a robot's domain holds many topics: read them all, not the first batch
            samples = self._publications.read(N=seen + batch, condition=self._alive)  # writers gone are not alive
            for sample in samples:
                if str(sample.participant_key) == own:
                    continue
                if sample.topic_name == LOWCMD_TOPIC:
                    command_writers.add(str(sample.key))
                elif sample.topic_name == LOWSTATE_TOPIC:
                    state_participants.add(str(sample.participant_key))
            if len(samples) < seen + batch:
                return sorted(command_writers), sorted(state_participants)
            seen += batch

    def close(self) -> None:
        # cyclonedds deletes an entity when its last reference goes: the writer first.
        self.writer = self.reader = self._publications = None
        self._waitset = self._condition = self._alive = None
        self.participant = None
