from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('annotation', '0019_reading_blocks'),
    ]

    operations = [
        migrations.AddField(
            model_name='candidate',
            name='render_reason',
            field=models.CharField(blank=True, max_length=300),
        ),
        migrations.AddField(
            model_name='newstudyrun',
            name='progress',
            field=models.JSONField(blank=True, default=dict),
        ),
        migrations.AddField(
            model_name='newstudyrun',
            name='renders',
            field=models.CharField(blank=True, max_length=300),
        ),
        migrations.AlterField(
            model_name='newstudyrun',
            name='status',
            field=models.CharField(choices=[('queued', 'Queued'), ('running', 'Running'), ('done', 'Done'), ('failed', 'Failed'), ('cancelled', 'Cancelled')], default='queued', max_length=16),
        ),
    ]
