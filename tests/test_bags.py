"""rosbag2 bags as training data: real bags of both storages, written with rosbags' writer, load
exactly as the recorder's CSVs of the same messages do."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest
from rosbags.rosbag2 import StoragePlugin, Writer
from rosbags.typesys import Stores, get_types_from_msg, get_typestore

from iknet_collect.legacy_pose import legacy_pose
from iknet_core.csv_schema import METADATA_FILE
from iknet_core.kinematics import OMX_CHAIN
from iknet_train.bags import (
    JOINT_STATE_TYPE,
    KINEMATICS_POSE_DEFINITIONS,
    KINEMATICS_POSE_TYPE,
    BagError,
    convert_bag,
    is_bag,
    load_bag,
)
from iknet_train.convert import main as convert_main
from iknet_train.data import load_recording
from iknet_train.synthetic import sample_joints, write_recording

COUNT = 300
START_NS = 1_700_000_000 * 10**9


def typestore(header: bool):
    store = get_typestore(Stores.LATEST)
    store.register(get_types_from_msg(KINEMATICS_POSE_DEFINITIONS[header], KINEMATICS_POSE_TYPE))
    return store


def stamp(store, ns: int):
    return store.types['builtin_interfaces/msg/Time'](sec=ns // 10**9, nanosec=ns % 10**9)


def joint_state(store, ns: int, q: np.ndarray):
    types = store.types
    names = [*OMX_CHAIN.joint_names, 'gripper']
    return types[JOINT_STATE_TYPE](
        header=types['std_msgs/msg/Header'](stamp=stamp(store, ns), frame_id=''),
        name=names,
        position=np.array([*q, 0.01]),
        velocity=np.zeros(len(names)),
        effort=np.zeros(len(names)),
    )


def kinematics_pose(store, ns: int, pose: np.ndarray, header: bool):
    types = store.types
    fields = {
        'pose': types['geometry_msgs/msg/Pose'](
            position=types['geometry_msgs/msg/Point'](x=pose[0], y=pose[1], z=pose[2]),
            orientation=types['geometry_msgs/msg/Quaternion'](
                x=pose[3], y=pose[4], z=pose[5], w=pose[6]
            ),
        ),
        'max_accelerations_scaling_factor': 0.0,
        'max_velocity_scaling_factor': 0.0,
        'tolerance': 0.0,
    }
    if header:
        fields['header'] = types['std_msgs/msg/Header'](stamp=stamp(store, ns), frame_id='')
    return types[KINEMATICS_POSE_TYPE](**fields)


def write_bag(
    path: Path,
    joints: np.ndarray,
    storage: StoragePlugin,
    header: bool = True,
    with_poses: bool = True,
    store_definitions: bool = True,
    pose_messages: bool = True,
    joint_stamps: np.ndarray | None = None,
) -> Path:
    """COUNT joint states at 100 Hz and the controller's pose for each; the bag logs each
    message 3 ms after its stamp, so a header stamp and a log time are told apart.
    pose_messages=False records the pose topic with no messages; joint_stamps (ns) replace the
    joint states' header stamps, not the times the bag logs them."""
    store = typestore(header)
    stamps = START_NS + 10_000_000 * np.arange(len(joints))
    joint_stamps = stamps if joint_stamps is None else joint_stamps
    poses = legacy_pose(joints, OMX_CHAIN)
    # Humble's sqlite3 bags store no message definitions: the reader must pick the variant.
    definition = {'msgdef': '', 'rihs01': store.hash_rihs01(KINEMATICS_POSE_TYPE)}
    definition = {} if store_definitions else definition
    with Writer(path, version=9, storage_plugin=storage) as writer:
        joint_topic = writer.add_connection('/joint_states', JOINT_STATE_TYPE, typestore=store)
        if with_poses:
            pose_topic = writer.add_connection(
                '/kinematics_pose', KINEMATICS_POSE_TYPE, typestore=store, **definition
            )
        for ns, joint_ns, q, pose in zip(stamps, joint_stamps, joints, poses, strict=True):
            ns = int(ns)
            message = store.serialize_cdr(joint_state(store, int(joint_ns), q), JOINT_STATE_TYPE)
            writer.write(joint_topic, ns + 3_000_000, message)
            if with_poses and pose_messages:
                message = kinematics_pose(store, ns, pose, header)
                # Without a header the stamp is the log time, as the recorder stamps on receipt.
                logged = ns + 3_000_000 if header else ns
                data = store.serialize_cdr(message, KINEMATICS_POSE_TYPE)
                writer.write(pose_topic, logged, data)
    return path


@pytest.fixture(scope='module')
def joints() -> np.ndarray:
    return sample_joints(
        COUNT, np.array([j.limits for j in OMX_CHAIN.joints]), np.random.default_rng(5)
    )


@pytest.fixture(scope='module')
def csv_recording(tmp_path_factory, joints):
    directory = tmp_path_factory.mktemp('csv')
    stamps = START_NS + 10_000_000 * np.arange(COUNT)
    write_recording(directory, stamps, joints, OMX_CHAIN, {'gripper': 0.01})
    return load_recording(
        *(directory / n for n in ('kinematics_pose.csv', 'joint_states.csv')), OMX_CHAIN
    )


@pytest.mark.parametrize('storage', [StoragePlugin.SQLITE3, StoragePlugin.MCAP], ids=str)
@pytest.mark.parametrize('header', [True, False], ids=['header', 'robotis'])
def test_a_bag_loads_as_the_csv_recording_of_the_same_messages(
    tmp_path, joints, csv_recording, storage, header
):
    bag = write_bag(tmp_path / 'bag', joints, storage, header)
    recording = load_bag(bag, OMX_CHAIN)
    assert recording.source == str(bag)
    assert len(recording) == COUNT and recording.dropped_poses == 0
    np.testing.assert_array_equal(recording.stamps, csv_recording.stamps)
    np.testing.assert_array_equal(recording.joints, csv_recording.joints)
    # The controller's quaternion sign may differ from write_recording's: same rotation.
    same_sign = np.sign(np.sum(recording.poses[:, 3:] * csv_recording.poses[:, 3:], -1))
    np.testing.assert_allclose(recording.poses[:, :3], csv_recording.poses[:, :3], atol=1e-15)
    np.testing.assert_allclose(
        recording.poses[:, 3:] * same_sign[:, None], csv_recording.poses[:, 3:], atol=1e-15
    )


def test_a_bag_without_definitions_is_read_with_the_variant_its_bytes_fit(tmp_path, joints):
    for header in (True, False):
        bag = write_bag(
            tmp_path / f'bag{header}',
            joints,
            StoragePlugin.SQLITE3,
            header,
            store_definitions=False,
        )
        recording = load_bag(bag, OMX_CHAIN)
        assert len(recording) == COUNT
        np.testing.assert_allclose(recording.poses, legacy_pose(joints, OMX_CHAIN), atol=1e-12)


def test_a_bag_of_joint_states_alone_gives_poses_by_fk(tmp_path, joints):
    bag = write_bag(tmp_path / 'bag', joints, StoragePlugin.MCAP, with_poses=False)
    recording = load_bag(bag, OMX_CHAIN)
    assert len(recording) == COUNT
    np.testing.assert_allclose(
        recording.poses, legacy_pose(recording.joints, OMX_CHAIN), atol=1e-9
    )


@pytest.mark.parametrize('storage', [StoragePlugin.SQLITE3, StoragePlugin.MCAP], ids=str)
def test_a_pose_topic_without_messages_gives_poses_by_fk_as_no_topic_does(
    tmp_path, joints, caplog, storage
):
    logged = []
    for with_poses in (False, True):
        bag = write_bag(
            tmp_path / f'bag{with_poses}', joints, storage, with_poses=with_poses,
            pose_messages=False,
        )  # fmt: skip
        caplog.clear()
        with caplog.at_level(logging.INFO, logger='iknet_train.bags'):
            recording = load_bag(bag, OMX_CHAIN)
        assert len(recording) == COUNT
        np.testing.assert_allclose(
            recording.poses, legacy_pose(recording.joints, OMX_CHAIN), atol=1e-9
        )
        logged.append(caplog.text.replace(str(bag), 'BAG'))
    assert 'poses are FK of the joint states' in logged[0] and logged[0] == logged[1]
    assert convert_main([str(bag), str(tmp_path / 'csv')]) == 0
    metadata = json.loads((tmp_path / 'csv' / METADATA_FILE).read_text())
    assert metadata['pose_source'] == 'fk'
    assert metadata['streams']['kinematics_pose']['written'] == COUNT


def test_a_stamp_going_back_is_skipped_and_counted_as_the_recorder_does(tmp_path, joints, caplog):
    stamps = START_NS + 10_000_000 * np.arange(COUNT)
    stamps[100] = stamps[99] - 50_000_000  # 50 ms back, as a restarted driver's clock may go
    bag = write_bag(tmp_path / 'bag', joints, StoragePlugin.MCAP, joint_stamps=stamps)
    mcap = next(bag.glob('*.mcap'))
    assert convert_main([str(mcap), str(tmp_path / 'csv')]) == 0
    streams = json.loads((tmp_path / 'csv' / METADATA_FILE).read_text())['streams']
    assert streams['joint_states']['skipped'] == {'stamp_not_increasing': 1}
    assert streams['joint_states']['written'] == COUNT - 1
    with caplog.at_level(logging.INFO, logger='iknet_train.data'):
        recording = load_bag(mcap, OMX_CHAIN)
    assert len(recording) == COUNT - 1 and recording.dropped_poses == 1
    assert f'{mcap}: {COUNT - 1} pairs' in caplog.text, 'the log names the bag'
    assert f"{mcap}: skipped joint_states messages {{'stamp_not_increasing': 1}}" in caplog.text
    assert 'iknet-bag-' not in caplog.text, 'not the temporary folder it was read from'


def test_errors_reading_a_bag_name_the_bag_not_its_temporary_folder(tmp_path, joints):
    stamps = START_NS + 10_000_000 * np.arange(COUNT) + 1000 * 10**9  # another clock
    bag = write_bag(tmp_path / 'bag', joints, StoragePlugin.MCAP, joint_stamps=stamps)
    with pytest.raises(BagError, match='no overlap in time') as raised:
        load_bag(bag, OMX_CHAIN)
    assert f'{bag} (converted to joint_states.csv) spans' in str(raised.value)
    assert 'iknet-bag-' not in str(raised.value)


def test_iknet_convert_writes_the_csv_pair_and_says_what_it_read(tmp_path, joints, capsys):
    bag = write_bag(tmp_path / 'bag', joints, StoragePlugin.MCAP)
    mcap = next(bag.glob('*.mcap'))
    assert is_bag(bag) and is_bag(mcap) and not is_bag(tmp_path)
    assert convert_main([str(mcap), str(tmp_path / 'csv')]) == 0
    printed = capsys.readouterr().out
    assert f'joint_states: {COUNT} messages' in printed
    recording = load_recording(
        tmp_path / 'csv' / 'kinematics_pose.csv', tmp_path / 'csv' / 'joint_states.csv', OMX_CHAIN
    )
    assert len(recording) == COUNT and not recording.cut_short
    metadata = json.loads((tmp_path / 'csv' / METADATA_FILE).read_text())
    assert metadata['pose_stamp'] == 'header, else the bag log time'
    # ROBOTIS's header-less poses are stamped with the log time, their receipt: the loader
    # pairs them with the joint state before them, as it does the recorder's.
    bag = write_bag(tmp_path / 'robotis', joints, StoragePlugin.MCAP, header=False)
    assert convert_main([str(bag), str(tmp_path / 'robotis_csv')]) == 0
    metadata = json.loads((tmp_path / 'robotis_csv' / METADATA_FILE).read_text())
    assert metadata['pose_stamp'] == 'receipt'
    # Joint states alone: the poses are said to be FK, not messages of the bag.
    bag = write_bag(tmp_path / 'joints_only', joints, StoragePlugin.MCAP, with_poses=False)
    capsys.readouterr()
    assert convert_main([str(bag), str(tmp_path / 'joints_only_csv')]) == 0
    printed = capsys.readouterr().out
    said = f'kinematics_pose: {COUNT} poses by FK of the joint states (the bag has no pose topic)'
    assert said in printed, printed


def test_bags_that_cannot_give_training_data_are_clear_errors(tmp_path, joints, capsys):
    with pytest.raises(BagError, match='not a rosbag2 bag'):
        convert_bag(tmp_path, tmp_path / 'out', OMX_CHAIN)
    store = typestore(True)
    with Writer(tmp_path / 'poses_only', version=9) as writer:
        writer.add_connection('/kinematics_pose', KINEMATICS_POSE_TYPE, typestore=store)
    with pytest.raises(BagError, match=r'no sensor_msgs/msg/JointState topic.*/kinematics_pose'):
        load_bag(tmp_path / 'poses_only', OMX_CHAIN)
    with pytest.raises(BagError, match='no sensor_msgs/msg/JointState topic'):
        convert_bag(tmp_path / 'poses_only', tmp_path / 'made' / 'for_it', OMX_CHAIN)
    assert not (tmp_path / 'made').exists(), 'no empty folder left behind'
    (tmp_path / 'a_file').write_text('')
    bag = write_bag(tmp_path / 'bag', joints, StoragePlugin.MCAP)
    with pytest.raises(BagError, match='a_file is a file: convert into a folder'):
        convert_bag(bag, tmp_path / 'a_file', OMX_CHAIN)
    assert convert_main([str(tmp_path / 'missing.mcap'), str(tmp_path / 'out')]) == 1
    assert 'not a rosbag2 bag' in capsys.readouterr().err
    with pytest.raises(SystemExit) as stopped:  # a folder under a file: refused up front
        convert_main([str(bag), str(tmp_path / 'a_file' / 'csv')])
    assert stopped.value.code == 2 and 'a_file is a file, not a folder' in capsys.readouterr().err
    # A bag folder without its metadata.yaml (a recording killed hard): give its file.
    (bag / 'metadata.yaml').rename(tmp_path / 'metadata.yaml')
    mcap = next(bag.glob('*.mcap'))
    with pytest.raises(BagError, match=rf'but no metadata.yaml .*: give that file, {mcap}'):
        convert_bag(bag, tmp_path / 'unnamed', OMX_CHAIN)
    (tmp_path / 'metadata.yaml').rename(bag / 'metadata.yaml')
    # An MCAP file cut short, as a killed recorder leaves it: the error says how to repair it.
    mcap.write_bytes(mcap.read_bytes()[:-64])
    with pytest.raises(BagError, match=r"cannot open it .* can often be repaired: 'ros2 bag rei"):
        convert_bag(bag, tmp_path / 'cut', OMX_CHAIN)


def test_the_tools_take_a_bag_wherever_they_take_a_recording(tmp_path, joints, capsys):
    from iknet_train.bench import main as bench_main

    bag = write_bag(tmp_path / 'bag', joints, StoragePlugin.SQLITE3)
    db3 = next(bag.glob('*.db3'))
    argv = ['--data', str(db3), '--solvers', 'analytic', '--single-queries', '5']
    assert bench_main([*argv, '--batch-seconds', '0', '--out', str(tmp_path / 'bench')]) == 0
    report = json.loads((tmp_path / 'bench' / 'bench.json').read_text())
    assert report['data']['recordings'] == [str(db3)]
    assert report['data']['n_poses'] == COUNT
    assert report['solvers']['analytic']['solved'] == 1.0


def test_a_bag_never_overwrites_a_recording_and_globs_find_bags(tmp_path, joints, capsys):
    from argparse import Namespace

    from iknet_train.cli import recordings_from_args

    bag = write_bag(tmp_path / 'bag_a', joints, StoragePlugin.MCAP)
    assert convert_main([str(bag), str(tmp_path / 'csv')]) == 0
    before = (tmp_path / 'csv' / 'joint_states.csv').read_bytes()
    assert convert_main([str(bag), str(tmp_path / 'csv')]) == 1
    assert 'already holds a recording' in capsys.readouterr().err
    assert (tmp_path / 'csv' / 'joint_states.csv').read_bytes() == before
    flags = Namespace(
        kinematics_pose_csv=[], joint_states_csv=[], data=[str(tmp_path / 'bag_*')],
        tolerance_ms=2.0,
    )  # fmt: skip
    (recording,) = recordings_from_args(flags, OMX_CHAIN, tmp_path)
    assert recording.source == str(bag) and len(recording) == COUNT


def test_a_folder_gives_its_bags_and_recordings_and_each_is_read_once(tmp_path, joints, caplog):
    from argparse import Namespace

    from iknet_train.cli import recordings_from_args

    bag = write_bag(tmp_path / 'runs' / 'bag_a', joints, StoragePlugin.MCAP)
    loose = write_bag(tmp_path / 'bag_b', joints, StoragePlugin.SQLITE3)
    (loose_file,) = loose.glob('*.db3')
    (tmp_path / 'runs' / 'b.db3').write_bytes(loose_file.read_bytes())  # a bag file alone
    assert convert_main([str(bag), str(tmp_path / 'runs' / 'csv')]) == 0
    (bag_file,) = bag.glob('*.mcap')
    flags = Namespace(
        kinematics_pose_csv=[], joint_states_csv=[], tolerance_ms=2.0,
        data=[str(tmp_path / 'runs'), str(bag), str(bag_file)],
    )  # fmt: skip
    recordings = recordings_from_args(flags, OMX_CHAIN, tmp_path)
    sources = sorted(Path(recording.source).name for recording in recordings)
    # runs/csv is bag_a converted (iknet-convert): read once, as the bag.
    assert sources == ['b.db3', 'bag_a']
    assert all(len(recording) == COUNT for recording in recordings)
    assert 'is named twice: read once' in caplog.text
    assert 'was converted from a bag that is read too: left out' in caplog.text
    flags.data = [str(tmp_path / 'runs' / 'csv')]  # alone, the converted CSVs are read
    (recording,) = recordings_from_args(flags, OMX_CHAIN, tmp_path)
    assert Path(recording.source).name == 'csv' and len(recording) == COUNT
    caplog.clear()
    twice = str(tmp_path / 'runs' / 'csv')
    recordings_from_args(Namespace(**{**vars(flags), 'data': [twice, twice]}), OMX_CHAIN, tmp_path)
    assert 'kinematics_pose.csv and ' in caplog.text and 'PosixPath' not in caplog.text
