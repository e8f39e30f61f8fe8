"""Create the three role groups of docs/protocol.md "Who does what" (rater, researcher, admin)."""

from __future__ import annotations

from django.db import migrations


def create_groups(apps, schema_editor):  # type: ignore[no-untyped-def]
    Group = apps.get_model("auth", "Group")
    for name in ("admin", "researcher", "rater"):
        Group.objects.get_or_create(name=name)


class Migration(migrations.Migration):
    dependencies = [("annotation", "0001_initial"), ("auth", "0012_alter_user_first_name_max_length")]
    operations = [migrations.RunPython(create_groups, migrations.RunPython.noop)]
