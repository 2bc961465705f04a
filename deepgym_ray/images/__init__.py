"""Per-task images: built from a Dockerfile once per content hash on each node that needs one.

Example:
    from deepgym_ray.images import ensure_image
    ensure_image(api, ImageRecipe(dockerfile="FROM deepgym/python:3-bookworm\\n"))
    # 'deepgym-task:3f2a...'
"""

from deepgym_ray.images.build import (
    ImageBuildError,
    build_log_path,
    ensure_image,
    ensure_pulled,
)

__all__ = ["ImageBuildError", "build_log_path", "ensure_image", "ensure_pulled"]
