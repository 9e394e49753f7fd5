"""Containers the Enroot/Pyxis way for a job's tasks and steps: images (squashfs
files, root directories, registry references imported as the user), the mount
namespace and its mounts, the job's GPUs and the NVIDIA driver inside, and
`--container-save`."""
