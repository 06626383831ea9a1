"""pip install . : the training, test and export tools for machines without ROS.

colcon builds this package with CMakeLists.txt (package.xml says ament_cmake); this is for pip.
"""

from pathlib import Path

from setuptools import find_packages, setup


def shared_data(folder: str) -> list[tuple[str, list[str]]]:
    """Ship dataset/ and models/ under <prefix>/share/iknet like the colcon install does."""
    root = Path(__file__).parent
    entries = {}
    for path in sorted((root / folder).rglob('*')):
        if path.is_file():
            relative = path.relative_to(root)
            target = str(Path('share/iknet') / relative.parent)
            entries.setdefault(target, []).append(str(relative))
    return sorted(entries.items())


setup(
    name='iknet',
    version='0.1.0',
    description='Learned inverse kinematics for ROS 2 manipulators (OpenManipulator-X first)',
    license='Apache-2.0',
    python_requires='>=3.10',
    packages=find_packages(
        include=['iknet_core*', 'iknet_collect*', 'iknet_train*', 'iknet_ros*']
    ),
    data_files=shared_data('dataset') + shared_data('models'),
    install_requires=[
        'numpy',
        'pandas',
        'matplotlib',
        'torch',
        'pytorch-pfn-extras',
        'onnx',
        'onnxruntime',
        'PyYAML',
    ],
    entry_points={
        'console_scripts': [
            'iknet-train=iknet_train.train:main',
            'iknet-test=iknet_train.evaluate:main',
            'iknet-export=iknet_train.export:main',
            'iknet-bench=iknet_train.bench:main',
        ]
    },
)
